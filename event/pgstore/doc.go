// Package pgstore is an [event.Store] in PostgreSQL (also
// [event.CursorStore], [event.LeaseStore], [event.GroupStateStore],
// [event.Notifier], [event.KeyStore], [event.Pruner], [event.Lister],
// [event.TopicStore] and [event.GroupStore]), on
// github.com/jackc/pgx/v5. Many processes may share one database: they
// publish into the same topics and share consumer groups.
//
//	s, err := pgstore.Open(ctx, "postgres://app@db/app", pgstore.Config{})
//	if err != nil { ... }
//	defer s.Close(ctx)
//	bus, err := event.NewBus(s, event.Config{Partitions: 8})
//
// Open creates the schema (Config.Schema) and the tables if they are
// absent, under an advisory lock so that processes starting together do
// not race.
//
// # Seqs: a reader never skips a committed record
//
// Each topic has a counter row in promlib_topics. An append transaction
// first updates that row (INSERT ... ON CONFLICT (topic) DO UPDATE SET
// head = head RETURNING head), which locks it until the transaction ends,
// then inserts the new records at head+1.. and writes the new head. A second append to the topic waits
// for the lock, and PostgreSQL releases a transaction's locks only after
// the transaction is visible to every new snapshot; so the second append
// reads the first one's head, and anything that sees the second's records
// sees the first's. Seqs therefore become visible in order, without gaps
// that fill in later: a consumer paging by seq (WHERE seq > cursor ORDER
// BY seq) cannot pass a record that commits afterwards. Counter rows are
// locked in topic order, so transactions that append to several topics
// cannot deadlock. Ids are checked after the lock is taken, so an id
// published by two processes at once is stored once.
//
// # Group commit
//
// Concurrent appends in one process (of any topics) are written by one
// goroutine in one transaction, as multi-row INSERTs of up to 500 rows:
// one commit for all of them. The topic's counter row is locked and
// advanced by one upsert before the rows are inserted, so a transaction
// holds one statement per topic besides the INSERTs (and BEGIN, COMMIT).
// The appends of one topic that fit one INSERT, the common case of
// publishers that wait ([event.Bus.Publish]), are one statement on its
// own: the upsert in a WITH clause whose head the INSERT adds to each
// record's seq, one round trip to the server instead of four.
// The records are inserted without looking their ids up; when an insert fails (the unique (topic, id) index meets a
// stored id, as when a publish is retried) the transaction is rolled back
// and written again with the ids looked up first, so that a stored id
// returns its record and seqs stay contiguous. A transaction that fails
// then is retried one append at a time, so that one append's failure is
// its own.
//
// # Waking readers
//
// Every append transaction sends NOTIFY on the store's channel with the
// topic's new head and the topic ("HEAD TOPIC"), in the statement that
// advances the head; PostgreSQL delivers it at commit. Each store holds one
// connection that LISTENs and wakes the watchers of the topic (see
// [event.Notifier]) when the head is beyond what they were told, so
// consumers in other processes read new records at once, and the notice of
// a store's own append (whose watchers it woke already) costs its
// consumers no read. A watched topic
// is also polled (Config.PollInterval), which covers a lost connection
// until the listener reconnects.
//
// # Groups
//
// Membership heartbeats, partition leases, cursors and the state of a
// group above its cursor are rows, written by conditional upserts
// (INSERT ... ON CONFLICT ... DO UPDATE ... WHERE): a lease is taken only
// when free, expired or the member's own; a cursor commit never moves a
// cursor back. Lease times come from the processes' clocks, which must
// agree.
//
// A lease row carries a token that counts the partition's holdings: a
// renewal keeps it, a take-over or a grant after a release raises it (a
// release marks the row released instead of deleting it). A fenced cursor
// commit or group-state write (see [event.Fence]) reads the lease row
// with SELECT ... FOR SHARE in its transaction and writes only if the row
// names its member and token and has not expired. The share lock holds the
// row until the write commits, so an AcquireLease of another member (an
// upsert of the row) waits for the write; one that updated the row first
// makes the check wait, and then read the new holder and refuse.
//
// # Topic settings
//
// A topic's settings (its partition count, see [event.TopicStore]) are
// the partitions column of its counter row, 0 until it has some.
// CreateTopic sets it with one upsert that changes the row only while it
// is 0: of processes creating a topic together, one sets the count and
// the others wait for its commit on the row and read it. For a topic of an
// older release, the upsert counts the partitions its records and cursors
// show.
//
// # Group settings and expiry
//
// A consumer group's settings (see [event.GroupStore]) are the config
// column of its row in promlib_groups, as JSON, empty until it has some;
// the row's at is when they were created. CreateGroup sets them with one
// upsert that changes the row only while it has none, as CreateTopic
// does. TakeLease (an operator's cursor reset) is an upsert of the lease
// row that raises its token, so it waits for a fenced write that holds
// the row, as a take-over by AcquireLease does.
//
// A group's LastActive is the latest of its settings' creation, its
// cursors' last changes (promlib_cursors.at, written by the cursor upsert
// itself: no statement more per commit) and its members' heartbeats (the
// time a member left, for one that did). A database of an older release
// counts its migration as activity: its cursors get the time of the
// migration. ExpireGroup checks a group and deletes it in one
// transaction that first locks the group's row and its lease, cursor and
// member rows FOR UPDATE; a heartbeat holds the group's row FOR KEY SHARE
// for its statement, so a member that heartbeats is seen by the check or
// joins after the delete; a fenced write is seen by the check or refused
// after it. Row locks cannot hold rows that are not there yet: the first
// cursor of a partition written without a fence (a group's first cursors,
// an operator's SetCursor) or a partition's first lease, committed while
// an expiry runs, may be deleted with the group or outlive it. Those
// writers are no live members, whom the check would have seen.
package pgstore
