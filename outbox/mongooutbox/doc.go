// Package mongooutbox is an [outbox.Store] in MongoDB, on
// go.mongodb.org/mongo-driver/v2: rows in one collection, the drainers'
// lease in a second one.
//
//	store, err := mongooutbox.New(db, mongooutbox.Config{})
//	if err != nil { ... }
//	if _, err := store.EnsureIndexes(ctx); err != nil { ... }
//	tx, err := mongotxn.NewRunner(db.Client())
//	err = tx.InTx(ctx, func(ctx context.Context) error {
//		if _, err := orders.InsertOne(ctx, order); err != nil {
//			return err
//		}
//		return store.Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//
// # Guarantees
//
//   - Add writes in the transaction ctx carries (see package txn/mongotxn):
//     the rows become visible, to drainers too, when it commits. Without
//     a transaction Add is one InsertMany, which the server may apply in
//     part if it fails half way. An id the outbox holds is refused.
//   - The lease has a token that grows on every hand-over; marks of a
//     drainer whose token is older than a row's are refused
//     ([outbox.ErrStaleClaim]).
//   - Sent rows carry sent_at, the time they were marked sent; a TTL index
//     on it (where the server has TTL indexes) deletes them after
//     Config.Retention, and the drainer's retention deletes them anyway.
//   - It uses only operations that MongoDB 5+ and FerretDB 1.24 (the
//     bundled test server) both support; transactions need a replica set.
package mongooutbox
