// Package sqltxn implements [txn.Runner] on database/sql: InTx begins a
// transaction on a *sql.DB and hands fn a ctx that carries the *sql.Tx.
// The stores of that database join it when they get the ctx (an outbox
// row of [sqliteoutbox], a dedupe mark of [sqlitededupe]), and the
// application reaches it with [Tx] for its own statements:
//
//	tx, err := sqltxn.NewRunner(db, sqltxn.Config{})
//	...
//	err = tx.InTx(ctx, func(ctx context.Context) error {
//		t, _ := sqltxn.Tx(ctx)
//		if _, err := t.ExecContext(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
//			return err
//		}
//		return ob.Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//
// It names no driver: it serves SQLite (open the file with
// [sqlitestore.OpenDB] and run transactions on its DB.Write, whose one
// connection takes the write lock at BEGIN) and any other database/sql database. A transaction begun by the
// application itself joins in with [WithTx]. [AfterCommit] runs a
// function once a runner's transaction commits (the outbox wakes its
// drainers with it).
//
// # Guarantees
//
//   - The transaction commits when fn returns nil and ctx has not ended,
//     and rolls back otherwise; InTx returns fn's error, ctx's, or the
//     commit's.
//   - An InTx inside a transaction of the same *sql.DB joins it: fn's
//     writes commit or roll back with the outer transaction. Inside a
//     transaction of another database it begins its own; both stay
//     reachable through ctx ([From]).
//   - A store handed a ctx that carries transactions of other databases
//     only fails with [ErrOtherDB] rather than write outside them.
//   - Retries are the driver's business: Config.Retry says which errors
//     run fn again (nil: none), up to Config.MaxAttempts runs.
//
// With SQLite, keep the transaction short and make every statement in it
// through its ctx: the database has one writer, and a statement made
// outside the transaction on a one-connection *sql.DB waits for the
// transaction to end.
//
// [sqliteoutbox]: https://pkg.go.dev/github.com/promethean/promlib/outbox/sqliteoutbox
// [sqlitededupe]: https://pkg.go.dev/github.com/promethean/promlib/dedupe/sqlitededupe
// [sqlitestore.OpenDB]: https://pkg.go.dev/github.com/promethean/promlib/event/sqlitestore#OpenDB
package sqltxn
