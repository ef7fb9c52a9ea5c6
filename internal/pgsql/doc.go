// Package pgsql gives the SQL outbox and dedupe stores a pgx pool as an
// [sqlconn.Source]: ctx's transaction is the one a [pgtxn.Runner] of the
// pool began.
//
// # Why internal/
//
// It is in internal/ and not below one feature because the backends of
// two features use it: outbox/pgoutbox and dedupe/pgdedupe.
package pgsql
