// Package dedupe makes a consumer group's handler take effect once per
// event id, although the bus delivers at least once.
//
//	store := dedupe.NewMemoryStore() // or mongodedupe, sqlitededupe, pgdedupe
//	sub, err := dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{
//		Bus: bus, Topic: "orders", Group: "billing", Store: store, Handler: handle,
//	})
//
// A [Store] claims keys with a lease, marks them done with a TTL and
// forgets them afterwards; dedupe/mongodedupe keeps them in MongoDB,
// dedupe/sqlitededupe in SQLite and dedupe/pgdedupe in PostgreSQL, and
// dedupe/dedupetest is the suite every store passes.
//
// # Guarantees
//
//   - [SubscribeExactlyOnce] (and [Wrap], for hosts that subscribe
//     themselves) claims each event id before the handler runs: two
//     deliveries of one id never run it at the same time (in one process
//     whatever the timing; across processes while the holder renews its
//     claim within three ack timeouts), a redelivered id that is done is
//     acked without running it, and a failed handler's claim is released
//     for the redelivery.
//   - A processed id is remembered for Options.TTL, by default the
//     consumer group's redelivery horizon plus one hour (1h02m31.5s with
//     the default group settings). The horizon is that of the settings
//     stored with the group ([event.GroupConfig]), read from the bus
//     before subscribing and again while subscribed, so an
//     [event.Bus.UpdateGroup] that lengthens it lengthens the marks too.
//     An expired key never counts as seen, whether or not it is deleted
//     yet.
//   - Expired keys are deleted without help in [MemoryStore] (a sweep
//     every [DefaultSweepInterval]) and, where the server has TTL
//     indexes, in dedupe/mongodedupe; elsewhere run [RunReaper].
//   - This is exactly once for effects that are idempotent or complete
//     before the mark; a crash between the effect and the mark runs the
//     handler again. [SubscribeExactlyOnceTx] closes that gap for a
//     handler whose effect is its writes to the store's database: the
//     mark and the writes commit in one transaction of a txn.Runner
//     ([MemoryStore] joins the in-process txn.Memory).
package dedupe
