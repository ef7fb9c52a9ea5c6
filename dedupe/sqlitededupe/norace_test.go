//go:build !race

package sqlitededupe_test

const raceEnabled = false
