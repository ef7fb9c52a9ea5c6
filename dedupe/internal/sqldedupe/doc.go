// Package sqldedupe is the [dedupe.TxStore] shared by dedupe/sqlitededupe
// and dedupe/pgdedupe: one implementation over an [sqlconn.Source], in
// the SQL that SQLite 3.35+ and PostgreSQL 12+ both accept. A [Dialect]
// gives the table definition.
//
// A key is one row (key, owner, done, expires in Unix milliseconds).
// Claims, completions and marks are single conditional statements
// (INSERT ... ON CONFLICT ... DO UPDATE ... WHERE), so any number of
// processes may share the table; every read filters on expires, so an
// expired key never counts, deleted or not.
package sqldedupe
