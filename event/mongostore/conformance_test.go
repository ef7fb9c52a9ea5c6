package mongostore_test

import (
	"testing"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/event/storetest"
)

func TestConformance(t *testing.T) {
	client(t)    // skip (or fail under CI) before the suite starts
	t.Parallel() // beside the package's other tests: each has its own database
	// Fewer: every call is a round trip to the test server, which runs a
	// database's commands one at a time.
	storetest.Run(t, func(t *testing.T) event.Store { return newStore(t) }, storetest.Options{
		Fewer: true,
		Clocked: func(t *testing.T, clk clock.Clock) event.Store {
			return newStore(t, func(c *mongostore.Config) { c.Clock = clk })
		},
	})
}
