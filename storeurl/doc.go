// Package storeurl opens promlib's database from one string, the same
// grammar wherever a program takes a store (the hub's and the bench's
// -store, a copy from one store to another):
//
//	memory                                   events in this process, lost when it stops
//	sqlite:PATH                              a SQLite file (sqlite:promlib.db, sqlite:/var/lib/hub/events.db)
//	postgres://[user[:password]@]host[:port]/database[?...]   also postgresql://
//	mongodb://host[:port][/...][?...]        also mongodb+srv://
//
// [Parse] reads a string into a [Location] and names what is wrong with a
// bad one ([ParseError], with a sentinel for errors.Is); [Open] (or
// [Location.Open]) opens the database and returns a [Database]: what the
// four have in common, the event store, the outbox, the dedupe store and
// the transaction runner, as promlib's interfaces.
//
//	db, err := storeurl.Open(ctx, "sqlite:promlib.db", storeurl.Config{})
//	if err != nil { ... }
//	defer db.Close(ctx)
//	bus, err := event.NewBus(db.Store(), event.Config{})
//
// Each database's own package (sqlitedb, pgdb, mongodb) has what is
// particular to it (a changelog table, the SQL connection, the pool, the
// client); [SQLite], [Postgres] and [MongoDB] return it from a Database.
//
// Errors never repeat a URL's password; [Location.String] hides it too,
// for logs.
package storeurl
