package dedupetest_test

import (
	"testing"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/dedupetest"
)

// A store of one's own runs the suite from a test of its package; here the
// memory store.
func Example() {
	_ = func(t *testing.T) {
		dedupetest.Run(t, func(t *testing.T) dedupe.Store { return dedupe.NewMemoryStore() }, dedupetest.Options{})
	}
}
