// Package sqlconn is the connection seam of the SQL outbox and dedupe
// stores (outbox/internal/sqloutbox, dedupe/internal/sqldedupe), which
// SQLite and PostgreSQL share: a [Source] gives the statements of one
// call either the caller's transaction that ctx carries or the database,
// whatever the driver API (database/sql here, pgx in internal/pgsql).
//
// # Why internal/
//
// It is in internal/ and not below one feature because the SQL stores of
// two features (outbox and dedupe) and internal/pgsql use it.
package sqlconn
