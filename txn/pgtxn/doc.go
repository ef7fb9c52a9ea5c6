// Package pgtxn implements [txn.Runner] on a pgx pool
// (github.com/jackc/pgx/v5/pgxpool): InTx begins a transaction and hands
// fn a ctx that carries the pgx.Tx. The stores on that pool join it when
// they get the ctx (an outbox row of [pgoutbox], a dedupe mark of
// [pgdedupe]), and the application reaches it with [Tx] for its own
// statements:
//
//	tx, err := pgtxn.NewRunner(pool, pgtxn.Config{})
//	...
//	err = tx.InTx(ctx, func(ctx context.Context) error {
//		t, _ := pgtxn.Tx(ctx)
//		if _, err := t.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
//			return err
//		}
//		return ob.Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//
// A transaction begun by the application itself joins in with [WithTx].
// [AfterCommit] runs a function once a runner's transaction commits (the
// outboxes wake their drainers with it).
//
// # Guarantees
//
//   - The transaction commits when fn returns nil and ctx has not ended,
//     and rolls back otherwise; InTx returns fn's error, ctx's, or the
//     commit's.
//   - A serialization failure (40001) or a deadlock (40P01), of a
//     statement in fn or of the commit, runs fn again in a new
//     transaction, up to Config.MaxAttempts runs: fn must have no effects
//     outside the transaction that a second run would repeat.
//   - An InTx inside a transaction of the same pool joins it. Inside a
//     transaction of another pool it begins its own; both stay reachable
//     through ctx ([From]).
//   - A store handed a ctx that carries transactions of other pools only
//     fails with [ErrOtherPool] rather than write outside them.
//
// [pgoutbox]: https://pkg.go.dev/github.com/promethean/promlib/outbox/pgoutbox
// [pgdedupe]: https://pkg.go.dev/github.com/promethean/promlib/dedupe/pgdedupe
package pgtxn
