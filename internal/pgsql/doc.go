// Package pgsql gives the SQL outbox and dedupe stores a pgx pool as an
// [sqlconn.Source]: ctx's transaction is the one a [pgtxn.Runner] of the
// pool began.
package pgsql
