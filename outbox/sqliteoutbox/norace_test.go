//go:build !race

package sqliteoutbox_test

const raceEnabled = false
