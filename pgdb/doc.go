// Package pgdb opens a PostgreSQL database once and hands out every part
// of promlib that lives in it: the event store ([pgstore]), the outbox
// ([pgoutbox]), the dedupe store ([pgdedupe]), the transaction runner
// ([pgtxn]) and changelog tables ([sqltable]). The per-feature packages
// stay the implementation; this package only wires them to one database
// and one schema.
//
//	db, err := pgdb.Open(ctx, pgdb.Config{URL: "postgres://app@db/app"})
//	if err != nil { ... }
//	defer db.Close(ctx)
//	bus, err := event.NewBus(db.Store(), event.Config{})
//	err = db.Txn().InTx(ctx, func(ctx context.Context) error {
//		t, _ := pgtxn.Tx(ctx)
//		if _, err := t.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
//			return err
//		}
//		return db.Outbox().Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//
// # Connections
//
// The outbox, the dedupe store and the runner share one pgx pool
// ([DB.Pool]): Config.Pool, the application's own, or one [Open] opens
// on Config.URL with its search_path set to Config.Schema. The event store
// keeps connections of its own (database/sql over pgx, and one that
// LISTENs for other processes' appends), opened on Config.URL or, when
// only a pool is given, on that pool's connection string. Changelog
// tables write through the store's connections ([DB.SQL]).
//
// Every part keeps its tables in one schema: Config.Schema (default
// public), created if absent. With a pool of the application's, Schema
// defaults to the pool's current schema, and a Schema that is not the
// pool's is refused, so that outbox rows never land apart from the
// events.
//
// [DB.Close] closes what Open opened, never the application's pool.
//
// # What it leaves out
//
// Schemas of payloads (schema/sqlschema) are not handed out: the schema
// packages are a Go module of their own (schema/go.mod) that requires this
// one and a JSON Schema compiler; importing them here would make every
// user of the event store require that module and its dependency. Give
// [DB.SQL] to sqlschema.New.
//
// [pgstore]: https://pkg.go.dev/github.com/promethean/promlib/event/pgstore
// [pgoutbox]: https://pkg.go.dev/github.com/promethean/promlib/outbox/pgoutbox
// [pgdedupe]: https://pkg.go.dev/github.com/promethean/promlib/dedupe/pgdedupe
// [pgtxn]: https://pkg.go.dev/github.com/promethean/promlib/txn/pgtxn
// [sqltable]: https://pkg.go.dev/github.com/promethean/promlib/projector/sqltable
package pgdb
