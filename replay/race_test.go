//go:build race

package replay_test

// raceEnabled is true under the race detector, which slows JSON encoding
// some twentyfold: the largest tests shrink to keep their run time modest.
const raceEnabled = true
