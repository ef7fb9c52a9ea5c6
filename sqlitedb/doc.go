// Package sqlitedb opens a SQLite file once and hands out every part of
// promlib that lives in it: the event store ([sqlitestore]), the outbox
// ([sqliteoutbox]), the dedupe store ([sqlitededupe]), the transaction
// runner ([sqltxn]) and changelog tables ([sqltable]). The per-feature
// packages stay the implementation; this package only wires them to one
// database.
//
//	db, err := sqlitedb.Open(ctx, sqlitedb.Config{Path: "promlib.db"})
//	if err != nil { ... }
//	defer db.Close(ctx)
//	bus, err := event.NewBus(db.Store(), event.Config{})
//	err = db.Txn().InTx(ctx, func(ctx context.Context) error {
//		t, _ := sqltxn.Tx(ctx)
//		if _, err := t.ExecContext(ctx, `INSERT INTO orders (id) VALUES (?)`, id); err != nil {
//			return err
//		}
//		return db.Outbox().Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//
// # One file, one writer
//
// [Open] opens the file as [sqlitestore.Open] does (WAL mode, one
// connection that writes, whose transactions take the write lock at
// BEGIN, and a pool of readers) and creates the tables of the store, the
// outbox and the dedupe store if they are absent. The outbox, the dedupe
// store, the runner and the tables all write through the store's writing
// connection ([DB.SQL]), so a transaction of the runner holds the
// application's rows, outbox rows and dedupe marks together; the
// store's appends wait for it, so keep transactions short.
//
// # What it leaves out
//
// Schemas of payloads (schema/sqlschema) are not handed out: the schema
// packages are a Go module of their own (schema/go.mod) that requires this
// one and a JSON Schema compiler; importing them here would make every
// user of the event store require that module and its dependency. Give
// [DB.SQL] to sqlschema.New.
//
// [sqlitestore]: https://pkg.go.dev/github.com/promethean/promlib/event/sqlitestore
// [sqliteoutbox]: https://pkg.go.dev/github.com/promethean/promlib/outbox/sqliteoutbox
// [sqlitededupe]: https://pkg.go.dev/github.com/promethean/promlib/dedupe/sqlitededupe
// [sqltxn]: https://pkg.go.dev/github.com/promethean/promlib/txn/sqltxn
// [sqltable]: https://pkg.go.dev/github.com/promethean/promlib/projector/sqltable
package sqlitedb
