// Package sqlstore is the event store shared by event/sqlitestore and
// event/pgstore: one implementation of [event.Store] and the other store
// interfaces over database/sql, written in the SQL that SQLite 3.35+ and
// PostgreSQL 12+ both accept ($N placeholders, INSERT ... ON CONFLICT ...
// DO UPDATE ... WHERE, RETURNING). A [Dialect] gives what differs: the
// schema, an optional expression (NOTIFY) run in every append
// transaction, and how a fenced write locks the lease it checks.
//
// Seqs are assigned under the topic's counter row: an append transaction
// first updates that row (which locks it until commit in PostgreSQL; SQLite
// has one writer at a time) in one upsert that advances the head by the
// records to insert and returns the head before them, then inserts the
// new records at head+1.. (when ids are looked up first, the row is locked,
// the ids looked up, and the new head written after the inserts; with
// [Dialect].RecordTypes the upsert and the INSERT of one topic's fresh
// records may be one statement, and with [Dialect].Columns the records
// go in as one array per column, in one statement whatever their number).
// Appends to one topic therefore commit
// one after the other in seq order, and a reader never sees seq n+1 before
// seq n: a reader paging by seq never skips a record that commits later.
//
// A partition's lease is one row of promlib_leases, kept once made (a
// release marks it released): its token counts the holdings of the
// partition, so a take-over or a grant after a release gets a greater one.
// A fenced cursor commit or group-state write checks that row and writes
// in one transaction that holds the row (see [Dialect.FenceLock]), so a
// take-over is ordered before the write or after it.
//
// A consumer group's row in promlib_groups holds its settings
// ([event.GroupStore]) as JSON (empty for none), and when they were created
// (at). With the time of each cursor's last change (promlib_cursors.at)
// and its members' heartbeats it gives the group's LastActive, which
// ExpireGroup checks. Times of leases, members and group activity are
// Unix nanoseconds of [Config].Clock.
//
// # Why internal/
//
// It is in internal/ and not in event/internal because the bench program
// (examples/bench) reads its batch limits (DefaultMaxBatch, MaxInsertRows,
// SQLiteInsertRows) for the raw inserts it measures the stores against,
// and Go's internal rule would hide event/internal from it.
package sqlstore
