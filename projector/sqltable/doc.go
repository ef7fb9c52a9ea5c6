// Package sqltable keeps a changelog table in PostgreSQL or SQLite: a SQL
// table equal to the latest value per key of a topic, as Kafka Streams'
// KTable or a compacted topic materialised. It is written on database/sql
// and links no driver: open the database with the event stores' OpenDB
// (event/pgstore, event/sqlitestore) or take a store's DB.
//
//	tbl, err := sqltable.New(sqltable.Config{
//		Bus: bus, Topic: "accounts", DB: store.DB(), Dialect: sqltable.SQLite, Table: "accounts",
//	})
//	err = tbl.EnsureTable(ctx)
//	go tbl.Run(ctx)
//	// SELECT key, value FROM accounts
//
// # Tables
//
// [Table.EnsureTable] creates the table <Table>_changelog and the view
// <Table> of its live rows:
//
//	key          TEXT PRIMARY KEY  the record's key
//	seq          BIGINT            the seq of the key's latest record
//	ts           BIGINT            its time (ms)
//	deleted      BOOLEAN           a tombstone's marker (not in the view)
//	value        JSONB / TEXT      a JSON payload (jsonb on PostgreSQL)
//	data         BYTEA / BLOB      a binary payload, as bytes
//	content_type TEXT              the record's content type
//
// A JSON payload goes to value (SQLite keeps its text as published), a
// payload of any other content type to data. PostgreSQL's jsonb cannot
// hold the escape \u0000: such a JSON payload goes to data, with its JSON
// content type. A key PostgreSQL's text cannot hold (one with the byte 0)
// is skipped and logged. Events without a key are acked and ignored.
//
// Table names are lower-case letters, digits and _ (at most
// [MaxTableLen] bytes), and quoted in every statement: a name that could
// change a statement is refused by [New] with [ErrInvalid] before the
// database is touched. A name taken by an object that is not a changelog
// table fails EnsureTable and leaves that object as it was.
//
// # Guarantees
//
// Per batch of events the table writes each key's newest event in one
// transaction, as one upsert per key:
//
//	INSERT INTO t (key, seq, ...) VALUES (...)
//	ON CONFLICT (key) DO UPDATE SET ... WHERE excluded.seq > t.seq
//
// A tombstone (a JSON null payload) is the same upsert with deleted set:
// the key's row stays as a marker with the tombstone's seq, so a put
// older than the deletion, redelivered or replayed, finds a higher seq
// and changes nothing; a newer put brings the key back. Since the guard
// is one statement on one row, it holds also when two writers race on a
// key (a member that stalled past its lease and the one that took its
// partition). The batch's events are acked after the commit; a crash
// before leaves them to be delivered again, and writing them again
// changes nothing.
//
// Markers of deleted keys are kept: they are what makes a late put
// harmless.
//
// # Rebuild
//
// [Table.Rebuild] replays the topic from its first event into
// <Table>_changelog_rebuild, then, in one transaction, locks the table,
// writes the events published meanwhile, drops the view and the old
// table, renames the new one and makes the view again. Readers see the
// old rows until the commit and the new ones after; the group's cursor
// does not move. Indexes or views that users add on the table are not
// carried over (an object that depends on the view or the table makes
// the swap fail, changing nothing).
//
// # Lag
//
// The lag of the table is its group's ([Table.Lag]; the ops endpoints show
// it as the lag of group [Config.Group]).
package sqltable
