// Package event is promlib's event core: records, the [Bus] that delivers
// them to durable consumer groups, the [Store], [CursorStore],
// [LeaseStore] and [GroupStateStore] interfaces a backend implements, and
// an in-memory store.
//
// # Records
//
// A [Record] has an id (a UUIDv7 unless the publisher gives one), a seq
// assigned by the store (per topic, strictly increasing from 1), a ts in
// Unix milliseconds, a key, headers and a payload: JSON, or bytes when
// [WithContentType] names another media type ([Record.IsBinary]; JSON
// encodings of the record carry them in base64 beside "payload_encoding":
// "base64"). Publishing an id the
// topic already holds stores nothing and returns the stored record, so a
// publisher may retry freely.
//
// # Publishing
//
// There are two ways to publish. [Bus.Publish] stores one record and
// returns when it is stored, adding no latency of its own. A [Publisher]
// ([Bus.NewPublisher]) pipelines: its Publish returns a [PublishFuture] at
// once, up to [PublisherConfig].MaxPending publishes are in flight (then
// Publish waits), consecutive records of a topic are written by one store
// append, records are stored in the order they were handed over, and each
// future carries that record's own outcome. [PublishJSON] is Bus.Publish
// of a value encoded as JSON. [Bus.NewRecord] and [Bus.Append] are the
// record-level layer under both, for the library's own batch writers
// (outbox drainer, compactor); applications need neither.
//
// A store declares what it can do by the interfaces it implements beside
// [Store]; an [InProcessStore] (the memory store) gets the Bus's
// in-process fast paths.
//
// # Delivery
//
// [Bus.Subscribe] joins a consumer group. Every group gets every record of
// the topic, at least once; within a group a record is in flight at one
// subscriber at a time, in this Bus or in any other Bus sharing the store.
// Order and cursors are by seq only, never by id or ts.
//
// A delivery is leased: it stays in flight until it is acked, nacked or its
// ack deadline passes ([Delivery.ModAck] extends it). A nack or an expired
// lease redelivers the record with attempt+1 after an exponential backoff;
// after MaxAttempts the record goes to the dead-letter topic (default
// [DeadLetterTopic], with the reason in headers) and counts as settled. Acks are
// fenced: an ack names its attempt, and an ack of an attempt whose lease has
// ended returns [ErrStaleAck] and settles nothing.
//
// The committed cursor of a group is the highest seq below which every
// record is settled (acked, dead-lettered or filtered out). Acks that arrive
// out of order are held until the gap before them closes, so a crash never
// loses a record that was delivered but not acked. Cursor writes are
// coalesced ([Config.CommitInterval]).
//
// What a group knows above its cursor (records settled out of order, the
// attempts of each record) belongs to the group, not to a subscriber: it
// is kept in a [GroupStateStore] (every store of this module is one:
// memory, MongoDB, SQLite, PostgreSQL), written with the cursor commits,
// so when the last subscriber leaves, or another member takes a partition,
// settled records are not delivered again and attempts go on towards
// MaxAttempts. An attempt counts when a handler gets the delivery
// ([SubscribeOptions.DeferStart]: when it calls [Delivery.Start]); a
// delivery given back before is no attempt.
//
// A handler gets a [*Delivery]. A handler written against [Message], the
// interface of a Delivery and of a message of the Go client of the
// gateway (ws/wsclient), runs unchanged in process or over the wire.
//
// MaxInFlight is flow control: at the bound the bus stops reading, it never
// drops. A new group starts at the position its first subscriber asks for
// (latest, earliest, seq, ts or after an id); a group with a committed
// cursor resumes from it.
//
// # Compaction and retention
//
// A store that implements [KeyStore] keeps the latest record of each key as
// records are written ([KeyStore.LatestByKey], [KeyStore.Latest]); one
// that implements [Pruner] deletes old records: superseded ones of
// compacted topics, or all records older than a retention. Every store of
// this module does (memory, MongoDB, SQLite, PostgreSQL). A group whose
// cursor falls below a topic's retention floor cannot get the deleted
// records: the Bus logs an error, calls [Observer.Skipped] with the count,
// and continues from the floor.
//
// # Partitions and members
//
// A topic has [Config.Partitions] partitions (FNV-1a hash of the key, or of
// the id when there is no key). The Buses subscribed to one group share the
// partitions through leases kept in a [LeaseStore]: each member takes its
// share, renews it every LeaseTTL/3, hands partitions over when members
// join, and takes over the partitions of a member that stopped renewing.
// Over a store that is a [LeaseRenewer] (every store of this module), a
// member renews its membership and the leases it holds in one write, so an
// idle group costs its store one write per renewal. Within a Bus, its partitions are shared out the same way among the
// group's subscriptions: one subscription serves a partition at a time.
// Order holds per partition when MaxInFlight is 1.
//
// # Key order
//
// [WithKeyOrdered] orders by key instead: the records of one key are
// delivered in seq order, the next once the one before is settled (acked
// or dead-lettered), while the records of other keys are in flight in
// parallel, up to MaxInFlight. A record that is nacked or whose lease
// ends holds only its own key while it backs off: the other keys of its
// partition go on. Records without a key keep no order. A key's records
// fall in one partition, so over several Buses the member that owns the
// partition orders them. The records held behind a key count against
// MaxInFlight, and one key holds at most [SubscribeOptions].MaxPerKey
// (default a tenth of MaxInFlight); its later records wait in the read
// buffer ([Config].ReadBatch) while the records behind them go on, and
// only a buffer full of waiting records stops reading until a key moves.
// Held records are not settled, so the cursor stays below them and a
// restart delivers them again. [GroupStats].Held counts them.
//
// # Interceptors and time
//
// [Config.PublishInterceptors] wrap every publish before the store sees it
// (to validate, to add headers, or to refuse); [Config.DeliveryInterceptors]
// wrap every handler call. [Config.Clock] tells the time of leases,
// deadlines, backoffs and heartbeats; tests give it a clock.Fake.
//
// # Shutdown
//
// [Bus.Close] stops reading, waits for running handlers until its context
// ends, gives unsettled deliveries back, commits cursors and releases
// leases. [Subscription.Close] does the same for one subscription.
package event
