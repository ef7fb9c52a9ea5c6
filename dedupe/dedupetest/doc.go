// Package dedupetest is the conformance suite of [dedupe.Store]: every
// implementation runs it from its own tests, alone and under
// [dedupe.SubscribeExactlyOnce] and [dedupe.Wrap].
//
//	func TestConformance(t *testing.T) {
//		dedupetest.Run(t, func(t *testing.T) dedupe.Store {
//			return dedupe.NewMemoryStore()
//		}, dedupetest.Options{})
//	}
//
// # Guarantees checked
//
// A live claim is exclusive and a released one is free; a done key is
// seen until it expires and never after; under redeliveries, rewinds and
// concurrent subscribers each id has its effect once; a failed handler's
// claim is released; two deliveries of one id never run at once.
package dedupetest
