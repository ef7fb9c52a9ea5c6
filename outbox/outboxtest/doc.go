// Package outboxtest is the conformance suite of [outbox.Store]: every
// implementation runs it, with a [outbox.Drainer] publishing to an
// in-memory bus, from its own tests.
//
//	func TestConformance(t *testing.T) {
//		outboxtest.Run(t, func(t *testing.T, c clock.Clock) outboxtest.Store {
//			return outbox.NewMemoryStoreWith(outbox.MemoryStoreConfig{Clock: c})
//		}, outboxtest.Options{})
//	}
//
// # Guarantees checked
//
// Rows drain in order per topic; a refused Add stores nothing; a row
// published again after a crash is stored once; two drainers publish each
// row once; a paused drainer's marks are fenced ([outbox.ErrStaleClaim]);
// a poison row fails after its attempts, with its backoffs, and holds back
// only its own ordering key; sent rows older than the retention are
// deleted, in batches, and no other row is.
package outboxtest
