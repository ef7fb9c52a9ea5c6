// Package sqlitededupe is a [dedupe.Store] in a SQLite database, over
// database/sql: one row per key, with an expiry. It is also a
// [dedupe.TxStore], for [dedupe.SubscribeExactlyOnceTx] with a
// [sqltxn.Runner] of the same *sql.DB: a handler's writes and the
// event's done mark commit together, so a redelivered event finds its
// mark and its handler does not run again, and a rolled-back one has
// neither and runs again.
//
//	file, err := sqlitestore.OpenDB("shop.db", sqlitestore.Config{})
//	defer file.Close() // the writer and the readers: the caller's to close
//	db := file.Write
//	store, err := sqlitededupe.New(db, sqlitededupe.Config{})
//	err = store.CreateTables(ctx)
//	tx, err := sqltxn.NewRunner(db, sqltxn.Config{})
//	sub, err := dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
//		Bus: bus, Topic: "orders", Group: "credits", Store: store, Tx: tx, Handler: credit,
//	})
//
// The package imports no driver: open the file with [sqlitestore.OpenDB]
// and give the store its writer, DB.Write, or open it with any SQLite driver set up alike (WAL, a busy timeout,
// transactions that take the write lock at BEGIN).
//
// # Guarantees
//
//   - Every read filters on the expiry, so an expired key never counts,
//     deleted or not; [dedupe.RunReaper] deletes expired keys.
//   - Claims, completions, releases and marks are single conditional
//     statements (INSERT ... ON CONFLICT ... DO UPDATE ... WHERE), safe
//     for any number of processes sharing the file.
//   - MarkDone writes in the caller's transaction; a live mark or claim of
//     the key fails it with [dedupe.ErrDone]. SQLite runs one write
//     transaction at a time, so of two deliveries of one event the second
//     finds the first one's mark.
//
// [sqltxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/sqltxn#Runner
// [sqlitestore.OpenDB]: https://pkg.go.dev/github.com/promethean/promlib/event/sqlitestore#OpenDB
package sqlitededupe
