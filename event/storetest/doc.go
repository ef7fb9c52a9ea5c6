// Package storetest is the conformance suite of [event.Store]
// implementations. Every store runs the same tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) event.Store { return newStore(t) })
//	}
//
// # What it checks
//
// The store contract directly (seq assignment, idempotent append, reads,
// head, lookups by id and time, cursors, leases), then the delivery
// semantics of [event.Bus] over the store: ordering, every start position,
// the settled-prefix cursor with out-of-order acks, nack and lease-expiry
// redelivery, ModAck, dead-lettering, restart without loss, groups,
// filters, Close with deliveries in flight, and several Bus instances
// sharing one group's partitions.
//
// The factory must return a new, empty store for each call; a store that
// also implements [event.CursorStore] and [event.LeaseStore] gets the whole
// suite. A store on a slow server, or one whose every record costs much
// CPU (SQLite in pure Go under the race detector), passes [Options] with
// Fewer, and
// [Shared] with Fewer for [RunProcesses]: the tests whose property does
// not depend on how many records they publish publish fewer.
package storetest
