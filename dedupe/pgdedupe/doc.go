// Package pgdedupe is a [dedupe.Store] in PostgreSQL, on a pgx pool
// (github.com/jackc/pgx/v5/pgxpool): one row per key, with an expiry, in
// the schema of the pool's search_path. It is also a [dedupe.TxStore],
// for [dedupe.SubscribeExactlyOnceTx] with a [pgtxn.Runner] of the same
// pool: a handler's writes and the event's done mark commit together, so
// a redelivered event finds its mark and its handler does not run again,
// and a rolled-back one has neither and runs again.
//
//	store, err := pgdedupe.New(pool, pgdedupe.Config{})
//	err = store.CreateTables(ctx)
//	tx, err := pgtxn.NewRunner(pool, pgtxn.Config{})
//	sub, err := dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
//		Bus: bus, Topic: "orders", Group: "credits", Store: store, Tx: tx, Handler: credit,
//	})
//
// # Guarantees
//
//   - Every read filters on the expiry, so an expired key never counts,
//     deleted or not; [dedupe.RunReaper] deletes expired keys.
//   - Claims, completions, releases and marks are single conditional
//     statements (INSERT ... ON CONFLICT ... DO UPDATE ... WHERE), safe
//     for any number of processes.
//   - MarkDone writes in the caller's transaction, before the handler
//     runs. A second delivery of the same event, in another transaction,
//     waits at its MarkDone for the first transaction's end: when that
//     commits it finds the mark ([dedupe.ErrDone]) and rolls back without
//     running the handler; when that rolls back it writes its own.
//   - CreateTables runs under an advisory lock: processes starting
//     together create the table once. Expiry times come from the
//     processes' clocks, which must agree.
//
// [pgtxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/pgtxn#Runner
package pgdedupe
