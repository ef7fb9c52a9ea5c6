package event_test

import (
	"testing"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) event.Store { return event.NewMemoryStore() }, storetest.Options{
		Clocked: func(t *testing.T, clk clock.Clock) event.Store {
			return event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})
		},
		// A schedule takes about a tenth of a second here: the most of
		// them in make test (thousands in make soak).
		Schedules: 100,
	})
}
