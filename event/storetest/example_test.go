package storetest_test

import (
	"testing"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/storetest"
)

// A store's test file runs the whole suite with a factory that returns a
// new, empty store for each test (here the memory store; a store of your
// own in your test file). It runs under go test, so it is compiled here,
// not run.
func Example() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T) in your _test.go file
		storetest.Run(t, func(t *testing.T) event.Store { return event.NewMemoryStore() }, storetest.Options{
			// Stores with leases give a factory on an injected clock too.
			Clocked: func(t *testing.T, clk clock.Clock) event.Store {
				return event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})
			},
		})
	}
}
