// Package mongostore is an [event.Store] in MongoDB (also
// [event.CursorStore], [event.LeaseStore], [event.GroupStateStore],
// [event.TopicStore], [event.GroupStore], [event.Notifier],
// [event.KeyStore], [event.Pruner] and [event.Lister]), on
// go.mongodb.org/mongo-driver/v2.
// Several processes may share one store: they publish into the same topics
// and share consumer groups.
//
//	s, err := mongostore.Connect(ctx, "mongodb://localhost:27017", mongostore.Config{Database: "app"})
//	if err != nil { ... }
//	defer s.Close(ctx)
//	if err := s.EnsureIndexes(ctx); err != nil { ... }
//	bus, err := event.NewBus(s, event.Config{Partitions: 8})
//
// [New] wraps a client the caller made; [Connect] makes one with bounded
// connect and server-selection timeouts and pings it. Indexes are created
// by the explicit [Store.EnsureIndexes], never as a side effect.
//
// # Guarantees
//
//   - Seqs are assigned by optimistic append under a unique (topic, seq)
//     index: a writer takes n+1 only after it has seen n stored, so a
//     reader paging by seq never skips a record that commits later, and
//     seqs stay contiguous across crashes.
//   - Publishing an id the topic holds returns the stored record (unique
//     (topic, id) index), also across processes.
//   - Concurrent appends in one process are group-committed (no linger
//     timer); cursor commits are coalesced and never move back ($max).
//   - A consumer group's state above its cursor (records settled out of
//     order, attempt counts) is stored, one document per partition, so
//     it survives the group's subscribers and a restart of the process.
//   - Partition leases carry tokens, and cursor commits and group-state
//     writes are fenced (see [event.Fence]): a partition's cursor and
//     lease are one document, so a fenced commit is one conditional
//     update. A group-state write checks the lease first; once another
//     member's grant has returned, no write of the previous holder lands.
//   - A topic's partition count is kept in its document of the topics
//     collection, created once by one conditional upsert (every process
//     gets the same count; a topic of an older release gets the count its
//     records and cursors show) and only ever raised.
//   - A consumer group's settings are a document of their own, created
//     once by one insert under a unique _id (of concurrent creators in
//     any process, one creates them and all read them).
//   - [Store.TakeLease] is one update of the partition's cursor
//     document, so a fenced commit is ordered wholly before or after it.
//   - A group's LastActive comes from the commit time that each cursor
//     write raises in its own update (no extra round trip), its
//     settings' creation, its members' heartbeats and leaving. A
//     database of an older release gets the time of its migration by
//     [Store.EnsureIndexes] as activity.
//   - [Store.ExpireGroup] cannot check and delete in one step (no
//     transactions): it deletes the group's settings on condition that
//     they are still idle, then the rest, and a member that joins in the
//     last milliseconds of that may see its group deleted under it (see
//     docs/MONGODB.md).
//   - Pruned records become tombstones, so a seq is never reused.
//   - Writes and reads use majority concern by default; with w:1 an
//     acknowledged publish can be lost in a failover.
//   - A document that does not decode is dead-lettered with its _id, never
//     dropped silently.
//
// It uses only operations that MongoDB 5+ and FerretDB 1.24 (the bundled
// test server) both support: no transactions, change streams, TTL indexes
// or $first. The mechanisms and the argument for each guarantee are in
// docs/MONGODB.md of the repository.
package mongostore
