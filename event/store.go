package event

import (
	"context"
	"slices"
	"time"
)

// Store keeps the records of topics. Implementations must be safe for
// concurrent use and must pass the conformance suite in event/storetest.
type Store interface {
	// Append stores recs, all of the given topic, in order, assigning each
	// the next seq of the topic. A record whose id the topic already holds
	// is not stored again: the stored one is returned in its place. The
	// returned slice has one record per input, in input order. Append must
	// not keep references to the inputs' payloads, headers or slices: it
	// copies what it keeps, so callers may reuse their buffers. A store
	// that can refuse single records and store the others returns a
	// [*RecordErrors] naming them, with the stored records in the result.
	// Any other error may still leave some records stored: appending them
	// again is safe.
	Append(ctx context.Context, topic string, recs []Record) ([]Record, error)
	// Read returns up to limit records of topic with seq > afterSeq, in seq
	// order. A store must never later show a record with a seq at or below
	// the last one it returned (no gaps that fill in afterwards).
	Read(ctx context.Context, topic string, afterSeq uint64, limit int) ([]Record, error)
	// Head returns the highest seq of topic, 0 for an empty topic.
	Head(ctx context.Context, topic string) (uint64, error)
	// FindByID returns the record of topic with the given id, or an error
	// wrapping ErrNotFound.
	FindByID(ctx context.Context, topic, id string) (Record, error)
	// FirstSeqAtOrAfter returns the smallest seq of topic whose record has
	// ts >= ms, and false if there is none.
	FirstSeqAtOrAfter(ctx context.Context, topic string, ms int64) (uint64, bool, error)
}

// PartitionRef names one partition of a consumer group on a topic: what a
// cursor is kept for and a lease is held on.
type PartitionRef struct {
	Topic, Group string
	Partition    int
}

// CursorStore keeps the committed cursors of consumer groups, one seq per
// (topic, group, partition).
type CursorStore interface {
	// Cursors returns the committed seq of each partition that has one.
	Cursors(ctx context.Context, topic, group string) (map[int]uint64, error)
	// CommitCursor raises the committed seq of p to seq; a lower seq than
	// the stored one leaves it unchanged. A commit with a non-zero fence is
	// applied only while the fence's lease on p is live (see [Fence]);
	// otherwise it changes nothing and returns an error wrapping
	// [ErrLeaseLost]. A zero fence (a group's first cursors, an operator's
	// repair) is not checked.
	CommitCursor(ctx context.Context, p PartitionRef, seq uint64, f Fence) error
	// SetCursor sets the committed seq of p, also backwards.
	SetCursor(ctx context.Context, p PartitionRef, seq uint64) error
}

// Fence names the lease under which a member writes the cursor and the
// group state of a partition: the member and the token
// [LeaseStore.AcquireLease] granted it. A store applies a fenced write only
// while that lease is live: held by the member, with that token, and not
// expired by the store's clock. So a member that stalled past its lease (a
// paused process, a long pause of the collector, a slow disk) writes
// nothing for the partition when it wakes, even before another member has
// taken it; and once another member holds the partition, no write of the
// previous holder lands, whenever it was sent.
//
// Stores make the check and the write one step: a lease granted to
// another member is ordered either after the write or before it, never
// between the check and the write.
type Fence struct {
	Member string
	Token  uint64
}

// IsZero reports whether f is no fence.
func (f Fence) IsZero() bool { return f.Member == "" && f.Token == 0 }

// LeaseStore keeps the membership of consumer groups and the leases of
// their partitions, so that several Bus instances (in one process or many)
// share a group's partitions: a partition is leased to one member at a time.
type LeaseStore interface {
	// Heartbeat records that member is alive until now+ttl and returns the
	// members of the group alive now, sorted.
	Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error)
	// Leave removes member from the group. A Heartbeat of member that
	// began before Leave and is applied after it (a call its caller gave up
	// on that a server still ran) must not bring the member back.
	Leave(ctx context.Context, topic, group, member string) error
	// AcquireLease leases p to member until now+ttl if it is free, expired
	// or already the member's, and reports whether it did. It returns the
	// lease's token, which names this holding of p: a grant to the member
	// that held p last, when nobody held it since and the member did not
	// release it (a renewal, or a grant after its lease ran out unused),
	// keeps the token; every other grant returns a token greater than any
	// the store granted for p before. So a member that gets its own token
	// back still knows all there is of p, and a member that gets another
	// one must forget what it knew: another member may have delivered and
	// committed p in between. ([Lister.DeleteGroup] may start tokens over.)
	AcquireLease(ctx context.Context, p PartitionRef, member string, ttl time.Duration) (token uint64, ok bool, err error)
	// ReleaseLease frees p if member holds it.
	ReleaseLease(ctx context.Context, p PartitionRef, member string) error
	// TakeLease leases p to member until now+ttl whoever holds it, with a
	// token greater than any the store granted for p before: from then
	// on the previous holder's fenced writes are refused and its next
	// renewal fails. An operator's cursor reset takes a group's
	// partitions this way, so that no member writes while the cursors
	// move, and every member reads the moved cursor when it takes a
	// partition again.
	TakeLease(ctx context.Context, p PartitionRef, member string, ttl time.Duration) (uint64, error)
}

// LeaseRenewer is a capability a [LeaseStore] declares when it renews a
// member's membership and the leases it holds in one write: one
// transaction, one round trip, one lock. A [Bus] whose Leases declares it
// renews each member of a group every LeaseTTL/3 with one Renew, and
// calls AcquireLease and ReleaseLease only for the partitions the member
// takes or gives up when the group's membership changes: an idle group
// costs the store one write per renewal instead of one per partition and
// one more for the membership. Over a LeaseStore without it, the Bus
// makes the calls one by one.
//
// A wrapper that embeds a LeaseRenewer and overrides Heartbeat or
// AcquireLease (to inject faults, to count) must override Renew too, or
// declare only LeaseStore: the Bus renews past its Heartbeat and
// AcquireLease otherwise.
type LeaseRenewer interface {
	LeaseStore
	// Renew is [LeaseStore.Heartbeat] of member followed by
	// [LeaseStore.AcquireLease] of each of parts (partitions of group on
	// topic) for ttl, as one write:
	//   - members are what Heartbeat returns: the members of the group
	//     alive now, sorted, member among them;
	//   - leases holds one [LeaseGrant] for each of parts, in the order of
	//     parts, with the token and the answer AcquireLease would give
	//     (same tokens: a renewal keeps its token, a grant after another
	//     holder gets a greater one, another member's live lease is not
	//     touched);
	//   - a renewal the store refuses as Heartbeat would (a heartbeat of
	//     a member that left, begun before it left) returns an error and
	//     renews no lease.
	//
	// parts may be empty (a heartbeat alone); parts that [CheckRenewParts]
	// refuses (a partition out of range, or named twice) are refused with
	// its error, wrapping [ErrInvalid], and nothing is written. On any other error the caller must assume
	// nothing of the outcome: some of it may have been applied, as when a
	// Heartbeat and some AcquireLease calls of a round fail.
	Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) (members []string, leases []LeaseGrant, err error)
}

// LeaseGrant is what [LeaseRenewer.Renew] answers for one partition: what
// [LeaseStore.AcquireLease] would return for it.
type LeaseGrant struct {
	Partition int
	// Token names the holding of the partition when Held (see
	// AcquireLease); 0 otherwise.
	Token uint64
	// Held reports whether member holds the partition's lease until
	// now+ttl: it is renewed or granted. False when another member holds
	// a live lease on it.
	Held bool
}

// CheckRenewParts checks the parts of a [LeaseRenewer.Renew] as every
// store does: each in 0..MaxPartitions-1, none twice. The error wraps
// ErrInvalid and names the partition.
func CheckRenewParts(parts []int) error {
	seen := make(map[int]struct{}, len(parts))
	for _, p := range parts {
		if p < 0 || p >= MaxPartitions {
			return invalid("parts", "partition %d, want 0 to %d", p, MaxPartitions-1)
		}
		if _, dup := seen[p]; dup {
			return invalid("parts", "partition %d named twice", p)
		}
		seen[p] = struct{}{}
	}
	return nil
}

// TopicConfig is what a store keeps of a topic's settings.
type TopicConfig struct {
	// Partitions is the number of partitions of the topic. A record's
	// partition is the hash of its key (or of its id, without a key)
	// modulo the count when it is stored, and never changes after.
	Partitions int `json:"partitions"`
}

// MaxPartitions is the most partitions a topic may have.
const MaxPartitions = 1 << 16

// Validate reports what is wrong with c, naming the field.
func (c TopicConfig) Validate() error {
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return invalid("partitions", "%d, want 1 to %d", c.Partitions, MaxPartitions)
	}
	return nil
}

// CheckGrow checks that topic's partitions may go from c's count to n, as
// every [TopicStore] checks [TopicStore.AddPartitions]: never fewer, since
// a record keeps the partition it was stored in and no member would read
// the partitions removed. The error wraps ErrInvalid.
func (c TopicConfig) CheckGrow(topic string, n int) error {
	if err := (TopicConfig{Partitions: n}).Validate(); err != nil {
		return err
	}
	if n < c.Partitions {
		return invalid("partitions", "topic %q has %d, asked %d: partitions cannot be removed (its records keep theirs, and no member would read the ones removed), only added", topic, c.Partitions, n)
	}
	return nil
}

// TopicStore keeps the settings of topics, so that every process that
// shares a store partitions a topic alike. A Bus creates a topic's
// settings at its first publish or subscribe ([Config].Partitions is the
// default of a new topic) and uses the stored ones from then on.
type TopicStore interface {
	// CreateTopic stores cfg as the settings of topic unless it has some,
	// and returns the settings it has now and whether this call created
	// them. A topic that holds records or group cursors written before the
	// store kept settings (a database of an older release) is given the
	// partition count they show: one more than the highest partition of
	// its records and cursors, or cfg's if that is higher.
	CreateTopic(ctx context.Context, topic string, cfg TopicConfig) (TopicConfig, bool, error)
	// Topic returns the settings of topic, or an error wrapping
	// ErrNotFound when it has none.
	Topic(ctx context.Context, topic string) (TopicConfig, error)
	// AddPartitions raises the partition count of topic to n. A count
	// lower than the topic's is refused with an error wrapping ErrInvalid
	// that says partitions cannot be removed; the same count is no error;
	// a topic without settings is an error wrapping ErrNotFound.
	AddPartitions(ctx context.Context, topic string, n int) error
}

// Notifier is implemented by stores that can tell when a topic gets new
// records (an in-process store, or a store with change streams). A Bus over
// a Notifier needs no polling.
type Notifier interface {
	// Watch returns a channel that receives a value (coalesced) after
	// records are appended to topic, and a function that stops the watch.
	Watch(topic string) (<-chan struct{}, func())
}

// InProcessStore is a capability a [Store] declares when its calls run in
// the caller's process and return in microseconds, with no round trip to a
// server or a file (the [MemoryStore] is one). A [Bus] over one takes two
// fast paths that would cost more than they save over a store a call of
// which is a round trip:
//   - each consumer group reads through ReadInto into one buffer of its
//     own, reused read after read, instead of a new slice per read;
//   - a [Publisher]'s window defaults to [DefaultMaxPendingInProcess]
//     instead of [DefaultMaxPending] (a batch of 128 costs no more per
//     record than a larger one when an append is not a round trip, and a
//     smaller window keeps the publisher from running ahead of the
//     process's subscribers).
//
// A third-party store that keeps its records in memory gets the same paths
// by implementing it. A wrapper that embeds such a store and overrides
// Read (to inject faults, to count) must override ReadInto too, or the
// Bus's groups read past its Read.
type InProcessStore interface {
	Store
	// ReadInto is [Store.Read] appending to buf (which may be nil) and
	// returning it: the records read go into buf's array when it has room.
	// The caller owns buf and may reuse it once it is done with the
	// records.
	ReadInto(ctx context.Context, topic string, afterSeq uint64, limit int, buf []Record) ([]Record, error)
}

// KeyStore is implemented by stores that keep the latest record of each
// key of a topic as records are written, so that a compacted topic's state
// can be read without scanning it.
type KeyStore interface {
	// LatestByKey returns the latest record (highest seq) of each of keys
	// that topic holds; keys it does not hold are absent from the map.
	LatestByKey(ctx context.Context, topic string, keys []string) (map[string]Record, error)
	// Latest returns the latest record of each key of topic, in key order,
	// for keys greater than afterKey, at most limit of them. Page with the
	// last key returned.
	Latest(ctx context.Context, topic, afterKey string, limit int) ([]Record, error)
}

// Pruner is implemented by stores that can delete old records. Deleting
// never changes the seqs of the records that remain, and a deleted seq is
// never given again.
type Pruner interface {
	// Prune deletes the records of topic with ts < before (Unix ms). With
	// keepLatest, the latest record of each key is kept (compaction);
	// without, every older record goes (retention), and the topic's
	// retention floor rises to the lowest seq left. It returns how many
	// records it deleted.
	Prune(ctx context.Context, topic string, before int64, keepLatest bool) (int, error)
	// Floor returns the topic's retention floor: every record below it was
	// deleted by retention (1 for a topic retention never touched). A
	// consumer whose cursor is below Floor-1 has missed records.
	Floor(ctx context.Context, topic string) (uint64, error)
}

// GroupStateStore keeps what a consumer group knows of each partition
// beyond its committed cursor: which records above the cursor are settled
// (acked out of order, dead-lettered) and how many attempts each unsettled
// one has had. It belongs to the group, not to a subscriber: a member that
// takes a partition (after the last subscriber left, or from another
// process) reads it, so settled records are not delivered again and
// attempts keep counting towards MaxAttempts. The state of a partition is
// small: it covers the records between the cursor and the furthest one in
// flight.
type GroupStateStore interface {
	// GroupState returns the state of p.
	GroupState(ctx context.Context, p PartitionRef) (GroupState, error)
	// UpdateGroupState merges u into the state of p. A non-zero fence is
	// checked as by [CursorStore.CommitCursor]: a write whose lease is no
	// longer live changes nothing and returns an error wrapping
	// [ErrLeaseLost].
	UpdateGroupState(ctx context.Context, p PartitionRef, u GroupStateUpdate, f Fence) error
	// ResetGroupState deletes the state of p (its cursor was moved).
	ResetGroupState(ctx context.Context, p PartitionRef) error
}

// GroupState is the state of one partition of a consumer group above its
// committed cursor.
type GroupState struct {
	// Attempts holds, by seq, the number of delivery attempts started of
	// each record that has one and is not settled.
	Attempts map[uint64]int
	// Settled holds the seqs of the records settled above the cursor.
	Settled []uint64
}

// GroupStateUpdate is a change to the state of a partition.
type GroupStateUpdate struct {
	// Attempts raises the attempt count of each seq to at least the given
	// number; a settled seq stays settled.
	Attempts map[uint64]int
	// Settled marks seqs settled.
	Settled []uint64
	// Forget deletes the state of seqs the committed cursor has passed.
	// It wins over Attempts and Settled for the same seq.
	Forget []uint64
}

// IsZero reports whether u changes nothing.
func (u *GroupStateUpdate) IsZero() bool {
	return len(u.Attempts) == 0 && len(u.Settled) == 0 && len(u.Forget) == 0
}

// Lister is implemented by stores that list what they hold, for an
// operator: the topics with their counts, and the consumer groups of each
// topic with their cursors, members and leases. A store keeps a summary per
// topic and per group, updated by the writes that change them, so that
// listing never scans a topic's records. A group is known from its first
// cursor write (a Bus commits one when a group first subscribes), and
// stays listed after its members leave until [Lister.DeleteGroup] deletes
// it.
type Lister interface {
	// ListTopics returns every topic the store holds records of (or held:
	// a topic whose records were all pruned stays), sorted by name.
	ListTopics(ctx context.Context) ([]TopicInfo, error)
	// ListGroups returns the groups known on topic, sorted by name.
	ListGroups(ctx context.Context, topic string) ([]GroupInfo, error)
	// DeleteGroup deletes everything the store keeps of group on topic:
	// cursors, group state, leases, members, settings ([GroupStore]) and
	// its summary. Deleting a group that is not known is no error.
	DeleteGroup(ctx context.Context, topic, group string) error
	// ExpireGroup deletes group on topic as DeleteGroup does if it has no
	// live member and its LastActive ([GroupInfo]) is before the Unix ms
	// before, and reports whether it did. The check and the delete are
	// one step where the store allows it (a member that joins meanwhile
	// keeps the group); stores document where they do not.
	ExpireGroup(ctx context.Context, topic, group string, before int64) (bool, error)
}

// TopicInfo summarises a topic.
type TopicInfo struct {
	Topic string `json:"topic"`
	// Events counts the records the topic holds.
	Events int64 `json:"events"`
	// FirstSeq and FirstTS are those of the oldest record held (0 when
	// none); LastSeq and LastTS those of the newest record appended.
	FirstSeq uint64 `json:"first_seq"`
	FirstTS  int64  `json:"first_ts"`
	LastSeq  uint64 `json:"last_seq"`
	LastTS   int64  `json:"last_ts"`
	// Bytes is what the records take (payload, key and headers) where the
	// store knows it, -1 where it does not.
	Bytes int64 `json:"bytes"`
}

// GroupInfo summarises a consumer group on a topic.
type GroupInfo struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// Cursor is the lowest committed cursor over the group's partitions
	// (0 before the first commit), Head the topic's highest seq, Lag
	// Head - Cursor (an upper bound with several partitions).
	Cursor uint64 `json:"cursor"`
	Head   uint64 `json:"head"`
	Lag    uint64 `json:"lag"`
	// InFlight counts the records above the cursors that were delivered
	// and are not settled yet, over all members: in flight, or waiting
	// for a redelivery.
	InFlight int `json:"in_flight"`
	// Members are the live members, sorted.
	Members []string `json:"members"`
	// Partitions are the partitions the group has a cursor on, by number.
	Partitions []PartitionInfo `json:"partitions"`
	// Config is the group's stored settings ([GroupStore]), nil for a
	// group without (one that only an older release subscribed).
	Config *GroupConfig `json:"config,omitempty"`
	// LastActive is the Unix ms until which the group was last known to
	// be in use: its latest cursor commit, settings creation, or the end
	// of its latest member's heartbeat (or the time it left); 0 when the
	// store knows none. A database of an older release counts its
	// migration as activity.
	LastActive int64 `json:"last_active"`
}

// PartitionInfo is one partition of a consumer group.
type PartitionInfo struct {
	Partition int    `json:"partition"`
	Cursor    uint64 `json:"cursor"`
	// Owner is the member holding the partition's live lease, "" for none.
	Owner string `json:"owner,omitempty"`
	// InFlight counts the partition's delivered, unsettled records.
	InFlight int `json:"in_flight"`
}

// Summarise fills in Cursor, Lag and InFlight of g from its partitions and
// head, sorting the partitions; stores call it after filling those in.
func (g *GroupInfo) Summarise() {
	slices.SortFunc(g.Partitions, func(a, b PartitionInfo) int { return a.Partition - b.Partition })
	g.Cursor, g.InFlight = 0, 0
	for i, p := range g.Partitions {
		if i == 0 || p.Cursor < g.Cursor {
			g.Cursor = p.Cursor
		}
		g.InFlight += p.InFlight
	}
	g.Lag = 0
	if g.Head > g.Cursor {
		g.Lag = g.Head - g.Cursor
	}
	if g.Members == nil {
		g.Members = []string{}
	}
	if g.Partitions == nil {
		g.Partitions = []PartitionInfo{}
	}
	slices.Sort(g.Members)
}
