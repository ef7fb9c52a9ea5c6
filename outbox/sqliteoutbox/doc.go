// Package sqliteoutbox is an [outbox.Store] in a SQLite database, over
// database/sql: rows in one table, the drainers' lease in a second one.
// Add writes in the caller's transaction ([sqltxn.Runner]), so the outbox
// row and the application's own rows commit together or not at all.
//
//	file, err := sqlitestore.OpenDB("shop.db", sqlitestore.Config{})
//	defer file.Close() // the writer and the readers: the caller's to close
//	db := file.Write
//	store, err := sqliteoutbox.New(db, sqliteoutbox.Config{})
//	err = store.CreateTables(ctx)
//	tx, err := sqltxn.NewRunner(db, sqltxn.Config{})
//	err = tx.InTx(ctx, func(ctx context.Context) error {
//		t, _ := sqltxn.Tx(ctx)
//		if _, err := t.ExecContext(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
//			return err
//		}
//		return store.Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//
// The package imports no driver: open the file with [sqlitestore.OpenDB]
// and give the store its writer, DB.Write (WAL mode, a busy timeout, one
// writing connection whose transactions take the write lock at BEGIN,
// statements detached from their contexts' ends), or open it with any
// SQLite driver set up alike. The store's event
// database may be the same file ([sqlitestore.Store.DB]).
//
// # Guarantees
//
//   - Add stores all its messages or none, also inside the caller's
//     transaction, where it writes in a savepoint: a refused Add (a bad
//     message, an id the outbox holds) leaves the transaction usable and
//     without its rows. Rows added in a transaction become visible, to
//     drainers too, when it commits. This process's drainers wake at once
//     after an Add outside a transaction and after the commit of a
//     runner's transaction.
//   - Rows are claimed in the order of their seq (INTEGER PRIMARY KEY
//     AUTOINCREMENT), given at insert: transactions commit one at a time
//     in SQLite, so seq order is commit order.
//   - The lease is one row, taken and renewed by one conditional upsert;
//     its token grows on every hand-over, and marks of a drainer whose
//     token is older than a row's are refused ([outbox.ErrStaleClaim]).
//     Processes sharing the file share the lease.
//   - The drainer deletes sent rows after its Retention, in batches.
//
// [sqltxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/sqltxn#Runner
// [sqlitestore.OpenDB]: https://pkg.go.dev/github.com/promethean/promlib/event/sqlitestore#OpenDB
// [sqlitestore.Store.DB]: https://pkg.go.dev/github.com/promethean/promlib/event/sqlitestore#Store.DB
package sqliteoutbox
