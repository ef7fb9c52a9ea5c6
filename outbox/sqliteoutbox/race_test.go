//go:build race

package sqliteoutbox_test

// raceEnabled: SQLite in Go runs several times slower under the race
// detector, so the conformance suite runs with fewer rows.
const raceEnabled = true
