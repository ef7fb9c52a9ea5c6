// Package dedupe remembers which events a consumer group has processed,
// so that a handler's effect happens once per event id although the bus
// delivers at least once.
//
// # Stores
//
// A [Store] claims keys with a lease, marks them done with a TTL and
// forgets them afterwards; an expired key never counts as seen, whether or
// not a reaper ([RunReaper]) or the server's TTL index has deleted it yet.
// [MemoryStore] keeps keys in process; package dedupe/mongodedupe keeps
// them in MongoDB (with a TTL index where the server has them).
//
// # Exactly once
//
// [SubscribeExactlyOnce] (and [Wrap], for hosts that subscribe
// themselves) claims each event id before running the handler, keeps the
// claim and the delivery's lease alive while the handler runs, releases
// the claim when the handler fails and marks the id done when it
// succeeds. Two deliveries of one id never run the handler at the same
// time, and a redelivered id that is done is acked without running it.
//
// The guarantee is exactly-once effects for handlers whose effect is
// idempotent or completes before the mark is written. A crash between the
// effect and the mark runs the handler again on redelivery; only a store
// that writes the mark in the same transaction as the handler's own writes
// closes that gap: [SubscribeExactlyOnceTx] does, for handlers whose effect
// is their writes to the store's database, in a transaction of a
// txn.Runner (a [TxStore] such as mongodedupe's, on a server with
// transactions).
package dedupe
