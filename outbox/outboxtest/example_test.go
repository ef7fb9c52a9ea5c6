package outboxtest_test

import (
	"testing"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/outboxtest"
)

// A store of one's own runs the suite from a test of its package; here the
// memory store.
func Example() {
	_ = func(t *testing.T) {
		outboxtest.Run(t, func(t *testing.T, c clock.Clock) outboxtest.Store {
			return outbox.NewMemoryStoreWith(outbox.MemoryStoreConfig{Clock: c})
		}, outboxtest.Options{})
	}
}
