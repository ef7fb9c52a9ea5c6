//go:build race

package sqlitestore_test

// raceEnabled: SQLite in Go runs several times slower under the race
// detector, so the conformance suite publishes fewer records.
const raceEnabled = true
