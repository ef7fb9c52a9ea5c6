// Package mongostore is an [event.Store], [event.CursorStore],
// [event.LeaseStore], [event.Notifier], [event.KeyStore] and
// [event.Pruner] in MongoDB, on
// go.mongodb.org/mongo-driver/v2. Several processes may share one store:
// they publish into the same topics and share consumer groups.
//
//	s, err := mongostore.Connect(ctx, "mongodb://localhost:27017", mongostore.Config{Database: "app"})
//	if err != nil { ... }
//	defer s.Close(ctx)
//	if err := s.EnsureIndexes(ctx); err != nil { ... }
//	bus, err := event.NewBus(s, event.Config{Partitions: 8})
//
// [New] wraps a client the caller made; [Connect] makes one with bounded
// connect and server-selection timeouts and pings it, so a bad URL or a
// server that does not answer is an error within Config.ConnectTimeout.
//
// It uses only operations that MongoDB 5+ and FerretDB 1.24 both support:
// no transactions, change streams, TTL indexes or $first.
//
// # Collections and indexes
//
// Six collections, named with Config.CollectionPrefix: events (one
// document per record), latest (one per key of a topic), topics (one per
// pruned topic), cursors, members and leases. [Store.EnsureIndexes]
// creates their indexes; it is explicit, not a side effect of New. Every
// query is served by an index:
//
//   - Read, Head and seq assignment: the unique events (topic, seq) index
//     (a range of seq, or its last entry).
//   - Idempotent append and FindByID: the unique events (topic, id) index.
//   - The seq lookups of conflict handling and polling, the records of
//     LatestByKey and Latest, the latest entries of LatestByKey and the
//     topics documents: an equality on _id alone.
//   - Latest: the unique latest (topic, key) index, a range of key in key
//     order.
//   - Prune: the events (topic, ts) index for the records with ts < before,
//     and for the tombstones it removes (they have no ts: the index holds
//     them under null); the latest (topic, seq) index for the entries below
//     the retention floor; (topic, seq) up from the old floor for the new
//     one.
//   - Cursors, members and leases: their unique (topic, group, ...)
//     indexes.
//
// FirstSeqAtOrAfter wants the lowest seq with ts at or above a time, and
// ts need not grow with seq: the server walks (topic, seq) and checks ts,
// or takes the range of (topic, ts) and sorts it, as its planner finds
// faster; it runs once, when a group first starts by time. Deployments
// made before the latest-by-key support have an events index (topic, key,
// seq) that nothing uses any more; it can be dropped.
//
// # Seq assignment
//
// Seqs are assigned by optimistic append under the unique (topic, seq)
// index. A writer knows the topic's head h (from its own last write, or
// from the last entry of the index) and inserts its records with seqs
// h+1, h+2, ... in one ordered InsertMany. If another writer took h+1
// first, the insert fails with a duplicate key, which proves h+1 stored;
// the writer finds the new head from there (documents have the _id
// "<topic>/<seq>", so it gallops forward by _id lookups, which every
// server serves cheaply) and tries again. A writer that keeps losing reads
// the head from the index instead (one query, where galloping takes
// several round trips in which the others append more: on a slow server
// it could lose for good) and backs off a little.
//
// A reader can therefore never skip a record: a writer inserts n+1 only
// after it has seen n stored (its own insert of n succeeded, or n was in
// the index when it read the head, or its own insert of n failed as a
// duplicate, which the server reports only once the other n is committed). So seq n+1 becomes
// visible only after n, and a page read by seq has no gap that a slower
// writer fills in later. Seqs are contiguous: a crash between or during
// inserts leaves a prefix of the batch stored (each document is written
// atomically), never a hole. Pruning keeps them so (see Tombstones): only
// seqs that every writer knows to be below the head are ever freed.
//
// A duplicate key can also mean that the topic already holds a record's id
// (the unique (topic, id) index). MongoDB names the index in the error;
// where the server does not (FerretDB), the store looks the seq up by _id
// and, if another record holds it, it was a seq conflict; otherwise it
// looks the remaining ids of the batch up in one query. Ids found are returned as stored
// (idempotent append: nothing new is stored); if the failed record's id is
// not among them, the seq was taken. The head advances past a seq only
// when it is proven stored, so a hole can never appear. An ordered
// InsertMany that fails at document k has stored the documents before k,
// which keep their seqs.
//
// # Tombstones
//
// A pruned record is not deleted but becomes a tombstone: the document
// keeps _id, topic, seq and id and gets gone: true; every other field goes.
// Seq assignment needs this. A writer inserts at the head it knows plus
// one, and learns of other writers only from the unique index: a seq
// whose document was deleted would be free again, and a writer that knew
// an older head (or galloped over the hole) would store a new record
// there, below records that consumers already read. A tombstone keeps the
// seq taken, so the insert fails and the writer moves on. Reads skip
// tombstones (gone is filtered on the server), FindByID does not find them,
// FirstSeqAtOrAfter never matches them (no ts). A tombstone still holds its
// record's id in the unique (topic, id) index until the id is appended
// again: the writer then frees it (sets the tombstone's id to its seq, an
// integer, which no record id is) and the id is stored as a new record.
//
// Tombstones do not stay for ever: a Prune removes those older than
// Config.TombstoneTTL (1h by default), except the topic's highest document,
// which Head and the writers' head lookups rest on. Removing one frees its
// seq in the index, which is safe only once no writer can try that seq:
// each writer refreshes the head it knows (from the index) when what it
// knows is older than TombstoneTTL/4, and a write takes at most
// WriteTimeout, at most TombstoneTTL/4. Each Prune leaves a mark in the
// topic's document (every seq up to the head it read was written before
// the time it read it); a Prune at least TombstoneTTL later removes the
// tombstones up to that mark. The argument uses the clocks of the
// processes that prune and write: keep them in sync to well within
// TombstoneTTL/2. A negative TombstoneTTL keeps tombstones for ever.
//
// # Latest by key
//
// The latest collection holds one entry per key of a topic, {_id:
// "<topic>/<key>", topic, key, seq}, maintained as records are written:
// after each insert, one unordered bulk write upserts the entry of every
// key of the batch by _id with $max on seq. $max is atomic per document, so
// writers in several processes can race on a key and the highest seq
// stays; a lower seq never overwrites a higher one. Keyless records have no
// entry. The group-commit writer goes on with its next insert while the
// entries of the last one are raised; the Appends return once they are,
// so a LatestByKey after an Append sees its records.
//
// LatestByKey looks the entries and then their records up by _id; Latest
// pages through the (topic, key) index and looks the records up by _id;
// an entry whose record is a tombstone (retention deleted the key's latest
// record) is skipped, as the key has no state.
//
// A writer that dies between its insert and the upsert leaves the entry
// behind its key's newest record. Appending the record again (as a
// publisher that got no acknowledgement does) raises it, since the upsert
// also runs for records found stored already; if the upsert itself fails,
// Append fails, so the caller retries. Compaction never deletes a record
// that is newer than its key's entry, and raises such an entry when it
// meets the record.
//
// # Pruning and the retention floor
//
// Prune reads the head H first and only touches records up to H, so that
// records appended meanwhile are left alone. Retention (keepLatest false)
// turns every record with ts < before into a tombstone in one update,
// raises the topic's floor (kept in its topics document) to the lowest seq
// left, or H+1, and drops the latest entries below the floor. Compaction
// (keepLatest true) reads the keyed records with ts < before, looks their
// keys' entries up and turns the records older than their key's entry
// into tombstones, a chunk at a time; keyless records stay. Floor reads
// the topics document by _id.
//
// # Group commit
//
// Concurrent Appends to one topic in one process are written together:
// the first starts a write at once (no timer, so no latency is added
// without concurrency), and Appends that arrive while it runs are queued
// and combined into the next InsertMany (up to Config.MaxBatch records).
// Ids repeated within the combined batch are stored once. The writes of one
// topic are serialised in the process, so its writers never race each
// other for seqs; writers in other processes are kept apart by the index.
// Cursor commits are coalesced by the Bus (Config.CommitInterval) and
// written as an upsert with $max, so a late commit never moves a cursor
// back.
//
// # New records and the cache
//
// The store is a [event.Notifier]: its own appends wake the consumers of
// the topic at once, and one poller per watched topic reads the head every
// Config.PollInterval to notice records appended by other processes (one
// query per topic and process, however many groups consume it).
//
// Each topic keeps a bounded cache of its recent records (Config.
// CacheRecords, CacheBytes) holding a seq range that is known exactly:
// what this store just inserted at head+1.. (an insert there succeeds only
// if no other writer holds those seqs) and what reads from the server
// returned. Consumers in the process read from it instead of querying the
// server again; the cache shows exactly what the server would have shown.
//
// A Prune in any process may delete cached records. Prune deletes only
// records with ts < before, and before it deletes anything it raises the
// topic's prune horizon (the highest before announced, in the topics
// document) and waits 500ms. A Read serves a cached record only if its ts
// is at or above a horizon read less than 250ms ago (one _id lookup per
// topic and 250ms, while records are served from the cache); older
// records are read from the server. So a record deleted before a Read
// began is never served, whatever process deleted it; the argument
// assumes the processes' clocks run at about the same rate, not that they
// agree. Records are usually pruned long after they left the cache, so
// this costs little in the common case.
//
// # Consumer groups
//
// Members heartbeat into the members collection (expiresAt from the
// writer's clock; expired members are deleted by the next heartbeat of the
// group), and a partition's lease is taken by one conditional upsert: the
// lease document is updated if it is the member's own or expired, inserted
// if there is none, and otherwise the insert fails on the unique index.
// Expiry uses the clocks of the processes: keep them in sync to well
// within the Bus's LeaseTTL.
//
// # Write concern
//
// Writes use Config.WriteConcern, majority by default, and reads
// Config.ReadConcern, majority by default. With w:1 an acknowledged
// publish can be lost when the primary fails over before the write
// replicated, and its seq can then be given to another record, which a
// consumer whose cursor had already passed it never sees; cursor and lease
// writes can be rolled back too (redeliveries, a partition briefly held by
// two members).
//
// # Documents that do not decode
//
// A document of the events collection that does not decode into a record
// (written by hand, say, with a field of the wrong type) does not stop or
// loop a consumer: Read logs a warning with its _id, appends it once as
// relaxed extended JSON to the topic's dead-letter topic (Config.
// DeadLetterTopic, "<topic>.dlq" by default; headers name the reason, the
// topic, the seq and the _id) and skips it. Read fails instead of skipping
// a document it could not dead-letter, so nothing is dropped silently.
//
// # The bundled test server
//
// The tests run against FerretDB 1.24 on SQLite behind a proxy that runs
// one command at a time (tools/mongotest). Measured there: a filter that
// is an equality on _id and nothing else is answered without decoding
// documents; any other filter decodes documents in insertion order (until
// the first match for FindOne, all of them when the query sorts), whatever
// indexes exist, also an _id equality next to other conditions, inside a
// one-branch $or or not (10,000 documents: 2ms for _id alone at position
// 100, 68ms at position 9,900; with a condition on seq next to it 9ms and
// 1s). Updates and deletes, even by _id, take time that grows with the
// collection (about 10ms at 1,000 documents, 50ms at 10,000). So this
// store looks things up by _id alone wherever it can (seq lookups, latest
// entries, records of LatestByKey and Latest, topics documents), and on
// that server Read, Head, Latest's key range and Prune decode the
// collection: fine for tests, not for large topics. The server does not
// support a projection in findAndModify; the store asks for none.
package mongostore
