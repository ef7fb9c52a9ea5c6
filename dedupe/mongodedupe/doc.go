// Package mongodedupe is a [dedupe.Store] in MongoDB, on
// go.mongodb.org/mongo-driver/v2: one document per key, with an expiry
// date. It is also a [dedupe.TxStore], for
// [dedupe.SubscribeExactlyOnceTx] with a [mongotxn.Runner].
//
//	store, err := mongodedupe.New(db, mongodedupe.Config{})
//	if err != nil { ... }
//	ttl, err := store.EnsureIndexes(ctx) // false: run dedupe.RunReaper
//	sub, err := dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{
//		Bus: bus, Topic: "orders", Group: "billing", Store: store, Handler: handle,
//	})
//
// # Guarantees
//
//   - Every query filters on the expiry date, so an expired key never
//     counts, whether or not it is deleted yet; a TTL index (where the
//     server has one) or [dedupe.RunReaper] deletes it.
//   - Claims, marks and releases are single-document conditional writes,
//     safe for any number of processes.
//   - MarkDone writes in the caller's transaction; transactions need a
//     replica set or a sharded cluster. It uses only operations that
//     MongoDB 5+ and FerretDB 1.24 (the bundled test server) support.
//
// [mongotxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/mongotxn#Runner
package mongodedupe
