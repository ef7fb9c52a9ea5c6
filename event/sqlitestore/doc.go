// Package sqlitestore is an [event.Store] in a SQLite file (also
// [event.CursorStore], [event.LeaseStore], [event.GroupStateStore],
// [event.Notifier], [event.KeyStore], [event.Pruner], [event.Lister],
// [event.TopicStore] and [event.GroupStore]): durable without a server. Several processes may open the same file: they publish into the
// same topics and share consumer groups.
//
//	s, err := sqlitestore.Open(ctx, "promlib.db", sqlitestore.Config{})
//	if err != nil { ... }
//	defer s.Close(ctx)
//	bus, err := event.NewBus(s, event.Config{Partitions: 8})
//
// # Driver
//
// It uses modernc.org/sqlite, SQLite translated to Go: no cgo, so the
// library still cross-compiles and builds with CGO_ENABLED=0, at some
// cost in speed against the C library. The alternatives: mattn/go-sqlite3
// (the C library through cgo: faster, but needs a C toolchain for every
// target), ncruces/go-sqlite3 (the C library compiled to WebAssembly and
// run by wazero: no cgo, younger, and an interpreter or JIT between the
// store and the database) and crawshaw/zombiezen sqlite (cgo, their own
// APIs instead of database/sql). modernc.org/sqlite is the most used
// cgo-free driver, follows SQLite releases and speaks database/sql, which
// the transactional outbox and dedupe take.
//
// Each connection keeps the statements it compiled, up to 128 texts, least
// recently used out, and runs a kept statement again without compiling it
// (SQLite compiles a statement's text into a program for its virtual
// machine, a large part of a short statement's cost). A host's own
// statements on the same database share them: build a statement's text
// with placeholders for its values, not with the values in it, or each
// text is compiled once and pushes out the store's own.
//
// # Guarantees
//
//   - The file is in WAL mode: readers do not block the writer nor it
//     them. Writes go through one connection whose transactions take the
//     write lock at BEGIN; other processes wait for it up to
//     Config.BusyTimeout.
//   - Concurrent appends in one process are written in one transaction
//     (group commit, no linger timer): one sync of the log for all of
//     them. With Synchronous FULL (the default) an acknowledged publish
//     survives a power loss.
//   - Seqs are assigned under each topic's counter row within the write
//     transaction, so appends to a topic commit in seq order and a reader
//     never skips a record that commits later; seqs stay contiguous across
//     crashes (a transaction commits whole or not at all).
//   - Publishing an id the topic holds returns the stored record (unique
//     (topic, id) index), also across processes.
//   - Membership heartbeats, partition leases, cursors and the group state
//     above a cursor are rows, so a consumer group is shared by processes
//     and survives restarts.
//   - A fenced cursor commit or group-state write (see [event.Fence])
//     checks the partition's lease and writes in one write transaction,
//     which holds the write lock from BEGIN: no other process is granted
//     the lease between the check and the write.
//   - Pruned records are deleted; the counter row keeps the head, so a
//     seq is never given again.
//   - A topic's settings (its partition count, see [event.TopicStore])
//     are a column of its counter row, set once by one statement: of
//     processes creating a topic together, exactly one creates it and
//     all read the same count. A topic of an older release gets the count
//     its records and cursors show.
//   - A consumer group's settings (see [event.GroupStore]) are a column of
//     its row in promlib_groups, as JSON, set once by one statement as a
//     topic's are. Its LastActive is the latest of the settings' creation,
//     its cursors' last changes (a column the cursor write itself sets)
//     and its members' heartbeats; a file of an older release counts its
//     migration as activity. ExpireGroup checks a group and deletes it in
//     one write transaction: no member joins, and no cursor moves, between
//     the check and the delete.
//
// Appends in this process wake its watchers at once; records appended by
// another process are seen within Config.PollInterval.
package sqlitestore
