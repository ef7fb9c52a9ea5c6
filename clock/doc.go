// Package clock is the one source of time for promlib: leases, ack
// deadlines, heartbeats, token expiry, rate limits and stores read the time
// and arm their timers through a [Clock], so a test can move time by hand
// instead of sleeping.
//
// A nil Clock in any promlib Config means [System], the wall clock. Tests
// use [Fake]:
//
//	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
//	bus, _ := event.NewBus(store, event.Config{Clock: clk})
//	...
//	clk.Advance(30 * time.Second) // every lease that ends by then expires now
//
// This package imports nothing but the standard library; the core `event`
// package may import it.
package clock
