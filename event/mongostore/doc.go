// Package mongostore is an [event.Store], [event.CursorStore],
// [event.LeaseStore], [event.Notifier] and [event.KeyStore] in MongoDB, on
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
// Five collections, named with Config.CollectionPrefix: events (one
// document per record), latest (one per key of a topic), cursors, members
// and leases. [Store.EnsureIndexes] creates their indexes; it is explicit,
// not a side effect of New. Every query is served by an index:
//
//   - Read, Head and seq assignment: the unique events (topic, seq) index
//     (a range of seq, or its last entry).
//   - Idempotent append and FindByID: the unique events (topic, id) index.
//   - The seq lookups of conflict handling and polling, the records of
//     LatestByKey and Latest and the latest entries of LatestByKey: an
//     equality on _id alone.
//   - Latest: the unique latest (topic, key) index, a range of key in key
//     order.
//   - Cursors, members and leases: their unique (topic, group, ...)
//     indexes.
//
// FirstSeqAtOrAfter walks (topic, seq) and checks ts, since ts need not
// grow with seq; it runs once, when a group first starts by time.
// Deployments made before the latest-by-key support have an events index
// (topic, key, seq) that nothing uses any more; it can be dropped.
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
// server serves cheaply) and tries again (backing off a little when it
// keeps losing).
//
// A reader can therefore never skip a record: a writer inserts n+1 only
// after it has seen n stored (its own insert of n succeeded, or n was in
// the index when it read the head, or its own insert of n failed as a
// duplicate, which the server reports only once the other n is committed). So seq n+1 becomes
// visible only after n, and a page read by seq has no gap that a slower
// writer fills in later. Seqs are contiguous: a crash between or during
// inserts leaves a prefix of the batch stored (each document is written
// atomically), never a hole.
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
// pages through the (topic, key) index and looks the records up by _id.
//
// A writer that dies between its insert and the upsert leaves the entry
// behind its key's newest record. Appending the record again (as a
// publisher that got no acknowledgement does) raises it, since the upsert
// also runs for records found stored already; if the upsert itself fails,
// Append fails, so the caller retries.
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
// entries, records of LatestByKey and Latest), and on that server Read,
// Head and Latest's key range decode the collection: fine for tests, not
// for large topics.
package mongostore
