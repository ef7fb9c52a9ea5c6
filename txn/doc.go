// Package txn is the transaction seam between promlib's stores and the
// application's database: a [Runner] runs a function in a transaction and
// hands it a context that carries the transaction. Every store write that
// takes that context joins the transaction, so the application's own
// writes, an outbox row ([outbox.Store.Add]) and a dedupe mark
// ([dedupe.SubscribeExactlyOnceTx]) commit together or not at all.
//
// The package names no database. Each backend implements [Runner] next to
// its stores and reads the transaction back from the context it made:
// [mongotxn] for MongoDB sessions, [sqltxn] for a *sql.DB's *sql.Tx,
// [pgtxn] for a pgx pool's pgx.Tx. [Memory] is the runner of in-process
// stores (the memory outbox and dedupe stores, or an application's own
// through [Participant]): it buffers their writes and applies them
// together at the commit, for tests and examples.
//
//	tx := mongotxn.New(client)
//	err := tx.InTx(ctx, func(ctx context.Context) error {
//		if _, err := orders.InsertOne(ctx, order); err != nil {
//			return err
//		}
//		return ob.Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//
// # Guarantees
//
// InTx commits when fn returns nil and rolls back when it returns an
// error, which InTx returns. It may call fn more than once when the
// database asks for a retry (a transient conflict), so fn must not have
// effects outside the transaction that a second run would repeat.
//
// [outbox.Store.Add]: https://pkg.go.dev/github.com/promethean/promlib/outbox#Store
// [dedupe.SubscribeExactlyOnceTx]: https://pkg.go.dev/github.com/promethean/promlib/dedupe#SubscribeExactlyOnceTx
// [mongotxn]: https://pkg.go.dev/github.com/promethean/promlib/txn/mongotxn
// [sqltxn]: https://pkg.go.dev/github.com/promethean/promlib/txn/sqltxn
// [pgtxn]: https://pkg.go.dev/github.com/promethean/promlib/txn/pgtxn
package txn
