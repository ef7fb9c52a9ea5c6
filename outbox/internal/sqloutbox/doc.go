// Package sqloutbox is the [outbox.Store] shared by outbox/sqliteoutbox
// and outbox/pgoutbox: one implementation over an [sqlconn.Source], in the
// SQL that SQLite 3.35+ and PostgreSQL 12+ both accept ($N placeholders,
// INSERT ... ON CONFLICT ... DO UPDATE ... WHERE ... RETURNING, partial
// indexes, savepoints). A [Dialect] gives the table definitions, which
// differ in their column types.
//
// Rows are in one table, ordered by an increasing seq that the database
// assigns at insert; the drainers' lease is a row of a second table,
// taken and renewed by one conditional upsert. Times are Unix
// milliseconds.
package sqloutbox
