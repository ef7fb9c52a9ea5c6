// Package testpg gives tests a PostgreSQL server: PG_URL (make test starts
// a throwaway cluster with tools/pgtest/with-postgres.sh and sets it). A
// test without PG_URL is skipped, except under CI=true, where it fails:
// CI must run the PostgreSQL tests.
//
// # Why internal/
//
// It is test infrastructure of every layer (the event store, the outbox,
// dedupe and txn backends, sqltable, the entry points, storeurl, the
// programs) and of the nested schema module, so it is in the module's
// internal/, which all of them may import.
package testpg
