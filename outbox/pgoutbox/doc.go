// Package pgoutbox is an [outbox.Store] in PostgreSQL, on a pgx pool
// (github.com/jackc/pgx/v5/pgxpool): rows in one table, the drainers'
// lease in a second one, in the schema of the pool's search_path. Add
// writes in the caller's transaction ([pgtxn.Runner]), so the outbox row
// and the application's own rows commit together or not at all.
//
//	store, err := pgoutbox.New(pool, pgoutbox.Config{})
//	err = store.CreateTables(ctx)
//	tx, err := pgtxn.NewRunner(pool, pgtxn.Config{})
//	err = tx.InTx(ctx, func(ctx context.Context) error {
//		t, _ := pgtxn.Tx(ctx)
//		if _, err := t.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
//			return err
//		}
//		return store.Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//
// # Guarantees
//
//   - Add stores all its messages or none, also inside the caller's
//     transaction, where it writes in a savepoint: a refused Add (a bad
//     message, an id the outbox holds) leaves the transaction usable and
//     without its rows. Rows added in a transaction become visible, to
//     drainers too, when it commits. This process's drainers wake at once
//     after an Add outside a transaction and after the commit of a
//     runner's transaction; other processes' drainers poll.
//   - Rows are claimed in the order of their seq (an identity column),
//     given at insert. Rows of one transaction keep their order; of two
//     transactions that commit at the same time, the one with the lower
//     seqs may commit second and its rows are then published after the
//     other's. An application that needs the order of its transactions
//     kept per key serialises them itself (most do: they update the same
//     row).
//   - The lease is one row, taken and renewed by one conditional upsert
//     (INSERT ... ON CONFLICT ... DO UPDATE ... WHERE); its token grows on
//     every hand-over, and marks of a drainer whose token is older than a
//     row's are refused ([outbox.ErrStaleClaim]). Lease times come from
//     the processes' clocks, which must agree.
//   - CreateTables runs under an advisory lock: processes starting
//     together create the tables once.
//   - The drainer deletes sent rows after its Retention, in batches.
//
// [pgtxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/pgtxn#Runner
package pgoutbox
