// Package mongotxn implements [txn.Runner] with MongoDB sessions: InTx
// runs a function in a multi-document transaction, and every operation
// made with the context it passes (the application's own, an outbox row
// of [mongooutbox], a dedupe mark of [mongodedupe]) joins it.
//
//	tx, err := mongotxn.NewRunner(client)
//	...
//	err = tx.InTx(ctx, func(ctx context.Context) error {
//		_, err := orders.InsertOne(ctx, order)
//		return err
//	})
//
// # Guarantees
//
// The transaction commits when the function returns nil and aborts
// otherwise. A transient error (a write conflict, an unknown commit
// result) makes the driver run the function again, within its retry
// limit. An InTx inside another one on the same client joins the outer
// transaction. Transactions need a replica set or a sharded cluster.
//
// [mongooutbox]: https://pkg.go.dev/github.com/promethean/promlib/outbox/mongooutbox
// [mongodedupe]: https://pkg.go.dev/github.com/promethean/promlib/dedupe/mongodedupe
package mongotxn
