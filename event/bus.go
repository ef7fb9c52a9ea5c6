package event

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/promethean/promlib/clock"
)

// Defaults of [Config].
const (
	DefaultPartitions     = 1
	DefaultPollInterval   = 500 * time.Millisecond
	DefaultCommitInterval = 100 * time.Millisecond
	DefaultLeaseTTL       = 10 * time.Second
	DefaultReadBatch      = 256
)

// Config configures a [Bus]. The zero value of every field means its default.
type Config struct {
	// Cursors keeps committed cursors; default: the Store, which must then
	// implement CursorStore.
	Cursors CursorStore
	// Leases keeps group membership and partition leases; default: the
	// Store if it implements LeaseStore, else a table private to this Bus
	// (which then cannot share a group with other processes).
	Leases LeaseStore
	// GroupState keeps what groups know beyond their cursors (records
	// settled out of order, attempt counts); default: the Store if it
	// implements GroupStateStore, else Cursors if it does, else a table
	// private to this Bus (which then outlives the group's subscribers but
	// not the process).
	GroupState GroupStateStore
	// Groups keeps the settings of consumer groups ([GroupConfig]);
	// default: the Store if it implements GroupStore, else Cursors if it
	// does, else a table private to this Bus (whose groups then cannot
	// share their settings with other processes).
	Groups GroupStore
	// Partitions is the number of partitions of a topic this Bus creates
	// (default 1). Over a [TopicStore] a topic's count is kept in the
	// store from its first publish or subscribe, and every process uses
	// the stored one: a Bus configured otherwise says so once per topic in
	// its log (or refuses, with StrictPartitions). Partitions are added
	// with [Bus.AddPartitions], never removed.
	Partitions int
	// StrictPartitions makes a publish or subscribe to a topic whose
	// stored partition count differs from Partitions fail (an error
	// wrapping ErrInvalid) instead of using the stored count.
	StrictPartitions bool
	// PollInterval is how often a consumer looks for records published by
	// other processes, when the Store is not a Notifier (default 500ms).
	// Publishes through this Bus wake its consumers at once.
	PollInterval time.Duration
	// CommitInterval coalesces cursor writes: a group commits at most once
	// per interval, and on Close (default 100ms).
	CommitInterval time.Duration
	// LeaseTTL is how long a member keeps its partitions without renewing
	// them; renewal runs every LeaseTTL/3 (default 10s). A member that
	// stops loses its partitions to the others after about LeaseTTL.
	LeaseTTL time.Duration
	// ExpirySweep is how often the Bus deletes the groups whose
	// expiration policy says so ([GroupConfig].ExpireAfter,
	// [Bus.ExpireGroups]), over a store that is a [Lister] (default 1m; a
	// negative value: never, as for a Bus that only publishes).
	ExpirySweep time.Duration
	// ReadBatch is how many records a consumer reads from the store at once
	// (default 256).
	ReadBatch int
	// MemberID names this Bus in consumer groups (default: a new UUID).
	MemberID string
	// Logger receives warnings and errors; nil discards them.
	Logger *slog.Logger
	// Observer receives metrics events; nil means none.
	Observer Observer
	// Clock tells the time of leases, deadlines, backoffs, heartbeats and
	// record timestamps; nil means the system clock. A store that keeps
	// the leases has a clock of its own: give it the same one
	// ([MemoryStoreConfig].Clock).
	Clock clock.Clock
	// PublishInterceptors wrap every publish, the first outermost: it runs
	// first and sees the outcome last.
	PublishInterceptors []PublishInterceptor
	// DeliveryInterceptors wrap every handler call, the first outermost.
	DeliveryInterceptors []DeliveryInterceptor
}

func (c *Config) setDefaults(store Store) {
	c.Clock = clock.Or(c.Clock)
	if c.Cursors == nil {
		c.Cursors, _ = store.(CursorStore)
	}
	var private *MemoryStore
	if c.Leases == nil {
		if ls, ok := store.(LeaseStore); ok {
			c.Leases = ls
		} else {
			private = NewMemoryStoreWith(MemoryStoreConfig{Clock: c.Clock})
			c.Leases = private
		}
	}
	if c.GroupState == nil {
		if gs, ok := store.(GroupStateStore); ok {
			c.GroupState = gs
		} else if gs, ok := c.Cursors.(GroupStateStore); ok {
			c.GroupState = gs
		} else if private != nil {
			c.GroupState = private
		} else {
			c.GroupState = NewMemoryStore()
		}
	}
	if c.Groups == nil {
		if gs, ok := store.(GroupStore); ok {
			c.Groups = gs
		} else if gs, ok := c.Cursors.(GroupStore); ok {
			c.Groups = gs
		} else if private != nil {
			c.Groups = private
		} else {
			c.Groups = NewMemoryStore()
		}
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.ExpirySweep == 0 {
		c.ExpirySweep = DefaultExpirySweep
	}
	if c.ReadBatch == 0 {
		c.ReadBatch = DefaultReadBatch
	}
	if c.MemberID == "" {
		c.MemberID = uuid.NewString()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
}

// Validate reports every problem of c, joined.
func (c *Config) Validate() error {
	var errs []error
	if c.Cursors == nil {
		errs = append(errs, invalid("Cursors", "nil, and the store does not implement CursorStore"))
	}
	if c.Partitions < 0 || c.Partitions > 4096 {
		errs = append(errs, invalid("Partitions", "%d, want 1 to 4096", c.Partitions))
	}
	if c.PollInterval < 0 {
		errs = append(errs, invalid("PollInterval", "%v is negative", c.PollInterval))
	}
	if c.CommitInterval < 0 {
		errs = append(errs, invalid("CommitInterval", "%v is negative", c.CommitInterval))
	}
	if c.LeaseTTL < 0 {
		errs = append(errs, invalid("LeaseTTL", "%v is negative", c.LeaseTTL))
	}
	if c.ReadBatch < 0 {
		errs = append(errs, invalid("ReadBatch", "%d is negative", c.ReadBatch))
	}
	for i, ic := range c.PublishInterceptors {
		if ic == nil {
			errs = append(errs, invalid(fmt.Sprintf("PublishInterceptors[%d]", i), "nil"))
		}
	}
	for i, ic := range c.DeliveryInterceptors {
		if ic == nil {
			errs = append(errs, invalid(fmt.Sprintf("DeliveryInterceptors[%d]", i), "nil"))
		}
	}
	return joinErrs(errs)
}

// Bus publishes records to a Store and delivers them to consumer groups
// with leases, acks and durable cursors. It is safe for concurrent use.
type Bus struct {
	store    Store
	cfg      Config
	notifier Notifier
	log      *slog.Logger
	obs      Observer
	clk      clock.Clock
	sysClock bool        // clk is the wall clock (see NewRecord)
	publish  PublishFunc // the store's Append behind the interceptors
	topics   TopicStore  // the store's, or nil
	parts    sync.Map    // topic -> its partition count (int), as last read
	watchers busWatchers // of Watch

	// publishWait is publish for Bus.Publish: over a store for which
	// writesTogether is false, the interceptors run over the group commit
	// (groupcommit.go) instead of the store's Append.
	publishWait PublishFunc
	commits     groupCommit

	mu     sync.Mutex
	groups map[groupKey]*group
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
}

// NewBus returns a Bus over store.
func NewBus(store Store, cfg Config) (*Bus, error) {
	if store == nil {
		return nil, invalid("store", "nil")
	}
	cfg.setDefaults(store)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Bus{
		store:  store,
		cfg:    cfg,
		log:    cfg.Logger,
		obs:    cfg.Observer,
		clk:    cfg.Clock,
		groups: make(map[groupKey]*group),

		sysClock: clock.IsSystem(cfg.Clock),
		done:     make(chan struct{}),
	}
	b.notifier, _ = store.(Notifier)
	// The interceptors are copied: the caller's slices may change later.
	b.cfg.PublishInterceptors = slices.Clone(cfg.PublishInterceptors)
	b.cfg.DeliveryInterceptors = slices.Clone(cfg.DeliveryInterceptors)
	b.topics, _ = store.(TopicStore)
	if _, ok := store.(Lister); ok && b.cfg.ExpirySweep > 0 {
		b.wg.Add(1)
		go b.sweepExpired()
	}
	b.publish = b.partitioned(chainPublish(b.append, b.cfg.PublishInterceptors))
	b.publishWait = b.publish
	if !writesTogether(store) {
		b.commits.b = b
		b.publishWait = b.partitioned(chainPublish(b.commits.append, b.cfg.PublishInterceptors))
	}
	return b, nil
}

// writesTogether reports whether concurrent Appends to store cost about
// what one does: its calls run in process ([InProcessStore]) or it
// group-commits them itself ([GroupCommitter]).
func writesTogether(store Store) bool {
	if _, local := store.(InProcessStore); local {
		return true
	}
	gc, ok := store.(GroupCommitter)
	return ok && gc.GroupCommits()
}

// partitioned returns inner with each record's partition set first, from
// the topic's partition count.
func (b *Bus) partitioned(inner PublishFunc) PublishFunc {
	return func(ctx context.Context, topic string, recs []Record) ([]Record, error) {
		n, err := b.partitionsOf(ctx, topic)
		if err != nil {
			return nil, err
		}
		for i := range recs {
			recs[i].Partition = PartitionOf(recs[i].Key, recs[i].ID, n)
		}
		return inner(ctx, topic, recs)
	}
}

// Store returns the bus's store.
func (b *Bus) Store() Store { return b.store }

// Clock returns the bus's clock ([Config.Clock]); workers built on the bus
// (compactor, projector) tell time by it unless given their own.
func (b *Bus) Clock() clock.Clock { return b.clk }

// Partitions returns the number of partitions of topic: the stored count
// over a [TopicStore] (creating the topic's settings with
// [Config].Partitions if it has none), else Config.Partitions.
func (b *Bus) Partitions(ctx context.Context, topic string) (int, error) {
	if err := ValidateTopic(topic); err != nil {
		return 0, err
	}
	return b.partitionsOf(ctx, topic)
}

// partitionsOf returns the partition count of topic, read from the
// TopicStore once and refreshed by the topic's consumer groups.
func (b *Bus) partitionsOf(ctx context.Context, topic string) (int, error) {
	if v, ok := b.parts.Load(topic); ok {
		return v.(int), nil
	}
	if b.topics == nil {
		return b.cfg.Partitions, nil
	}
	c, _, err := b.topics.CreateTopic(ctx, topic, TopicConfig{Partitions: b.cfg.Partitions})
	if err != nil {
		return 0, fmt.Errorf("event: settings of topic %q: %w", topic, err)
	}
	if c.Partitions != b.cfg.Partitions {
		if b.cfg.StrictPartitions {
			return 0, invalid("Partitions", "topic %q has %d partitions in the store, this Bus is configured with %d (StrictPartitions)", topic, c.Partitions, b.cfg.Partitions)
		}
		b.log.Warn("event: topic has another partition count in the store than this Bus's Config.Partitions; using the store's",
			"topic", topic, "stored", c.Partitions, "configured", b.cfg.Partitions)
	}
	v, _ := b.parts.LoadOrStore(topic, c.Partitions)
	return v.(int), nil
}

// refreshPartitions reads the partition count of topic again, for a count
// raised by another process; it returns the count known now.
func (b *Bus) refreshPartitions(ctx context.Context, topic string) (int, error) {
	if b.topics == nil {
		return b.cfg.Partitions, nil
	}
	c, err := b.topics.Topic(ctx, topic)
	if err != nil {
		return 0, err
	}
	for {
		v, ok := b.parts.Load(topic)
		if ok && v.(int) >= c.Partitions {
			return v.(int), nil
		}
		if !ok {
			if v, loaded := b.parts.LoadOrStore(topic, c.Partitions); loaded {
				_ = v
				continue
			}
			return c.Partitions, nil
		}
		if b.parts.CompareAndSwap(topic, v, c.Partitions) {
			b.log.Info("event: topic's partitions were added", "topic", topic, "from", v.(int), "to", c.Partitions)
			return c.Partitions, nil
		}
	}
}

// AddPartitions raises the partition count of topic to n, in the store
// (a [TopicStore]). Records stored keep their partitions; new records
// spread over all n, so the records of one key published after the change
// may go to another partition than those before it: their order across
// the change is not kept (the records on each side keep theirs), as when
// partitions are added to a Kafka topic. No consumer group skips a record
// or gets a settled one again: the members of every group take the new
// partitions at their next lease renewal, in every process, and read them
// from where the topic was when they were added. Fewer partitions than the
// topic has are refused (ErrInvalid).
func (b *Bus) AddPartitions(ctx context.Context, topic string, n int) error {
	if b.isClosed() {
		return ErrClosed
	}
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	if b.topics == nil {
		return fmt.Errorf("%w: the store keeps no topic settings (not a TopicStore)", ErrInvalid)
	}
	if _, err := b.partitionsOf(ctx, topic); err != nil {
		return err
	}
	// The new partitions hold no record at or below the head now: groups
	// that exist start them there instead of reading the topic from its
	// start for them.
	head, err := b.store.Head(ctx, topic)
	if err != nil {
		return fmt.Errorf("event: add partitions to %q: %w", topic, err)
	}
	old, err := b.refreshPartitions(ctx, topic)
	if err != nil {
		return fmt.Errorf("event: add partitions to %q: %w", topic, err)
	}
	if err := b.topics.AddPartitions(ctx, topic, n); err != nil {
		return fmt.Errorf("event: add partitions to %q: %w", topic, err)
	}
	if l, ok := b.store.(Lister); ok && n > old && b.cfg.Cursors != nil {
		gs, err := l.ListGroups(ctx, topic)
		if err != nil {
			return fmt.Errorf("event: add partitions to %q: list groups: %w", topic, err)
		}
		for _, g := range gs {
			for p := old; p < n; p++ {
				// Raises only: a member that took p already and read it
				// from the start moved no further than head.
				if err := b.cfg.Cursors.CommitCursor(ctx, PartitionRef{Topic: topic, Group: g.Group, Partition: p}, head, Fence{}); err != nil {
					return fmt.Errorf("event: add partitions to %q: cursor of group %q: %w", topic, g.Group, err)
				}
			}
		}
	}
	_, err = b.refreshPartitions(ctx, topic)
	return err
}

// Publish stores payload, which must be one JSON value, as a record of
// topic and wakes the topic's consumers. Publishing an id the topic already
// holds returns the stored record.
//
// Publish waits for its record to be stored. Calls made at the same time
// share the store's write (group commit): a [GroupCommitter] store (the
// SQLite, PostgreSQL and MongoDB stores) writes concurrent appends
// together itself; over a store that is neither that nor an
// [InProcessStore], the Bus writes the records of concurrent calls to one
// topic with one [Store.Append], each call waiting for its own record's
// outcome. Each call runs the publish interceptors with its own ctx; such
// a shared append runs in a context of the Bus's own, which carries none
// of the callers' values and ends when every caller of it has given up (a
// call alone is appended with its own ctx). When ctx ends before the
// record is written, Publish returns ctx's error and nothing is stored;
// when it ends during the write, the record may be stored or not, and
// publishing it again with the same id ([WithID]) is safe.
func (b *Bus) Publish(ctx context.Context, topic string, payload []byte, opts ...PublishOption) (Record, error) {
	rec, err := b.NewRecord(topic, payload, resolvePublish(opts))
	if err != nil {
		return Record{}, err
	}
	out, err := b.publishWait(ctx, topic, []Record{rec})
	if err != nil {
		return Record{}, err
	}
	return out[0], nil
}

// NewRecord validates topic, payload and o and builds the record that
// Publish would store: a new UUIDv7 id unless o has one and the current
// time unless o has one. Its partition is set when it is published, from
// the topic's partition count. The record shares payload's memory until a
// Store copies it on Append.
//
// NewRecord and [Bus.Append] are the record-level layer under
// [Bus.Publish] and [Publisher], for code that must hand a batch of
// records to the store in one append: the outbox drainer (a batch of rows,
// then one row at a time so that a failing row holds back the rows of its
// key), the compactor (a topic's snapshots) and the Watermill publisher of
// contrib/watermill (a Publish of several messages). An application
// publishes with Publish or a Publisher.
func (b *Bus) NewRecord(topic string, payload []byte, o PublishOptions) (Record, error) {
	if b.isClosed() {
		return Record{}, ErrClosed
	}
	if err := ValidateTopic(topic); err != nil {
		return Record{}, err
	}
	if err := o.Validate(); err != nil {
		return Record{}, err
	}
	if err := checkPayload(payload, o.ContentType); err != nil {
		return Record{}, err
	}
	r := Record{
		ID: o.ID, TS: o.TS, Topic: topic, Key: o.Key, Headers: o.Headers,
		Payload: payload, CausedBy: o.CausedBy, Tags: o.Tags, SID: o.SID, ContentType: o.ContentType,
	}
	var idMilli int64 // the time of a UUIDv7 made here
	if r.ID == "" {
		r.ID, idMilli = newID()
	}
	if r.TS == 0 {
		if idMilli != 0 && b.sysClock {
			r.TS = idMilli // the id read the same clock just now
		} else {
			r.TS = b.clk.Now().UnixMilli()
		}
	}
	return r, nil
}

// Append stores records built by [Bus.NewRecord], all of one topic, in one
// store call, through the publish interceptors, and wakes the topic's
// consumers. It returns the stored records in input order (the stored one
// where an id already existed). It checks each record's payload and text
// fields as NewRecord does, and stores none if one is refused. A store
// that refuses single records and stores the others returns an error
// wrapping [*RecordErrors], with the stored records in the result. See
// NewRecord for who needs it.
func (b *Bus) Append(ctx context.Context, topic string, recs []Record) ([]Record, error) {
	if b.isClosed() {
		return nil, ErrClosed
	}
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	for i := range recs {
		if err := validateRecord(&recs[i]); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	return b.publish(ctx, topic, recs)
}

// append is the PublishFunc behind the interceptors.
func (b *Bus) append(ctx context.Context, topic string, recs []Record) ([]Record, error) {
	out, err := b.store.Append(ctx, topic, recs)
	if err != nil {
		// A store that stored some records and refused others says which:
		// the stored ones are returned with the error, and wake consumers.
		var re *RecordErrors
		if !errors.As(err, &re) || len(out) != len(recs) {
			return nil, fmt.Errorf("event: publish to %q: %w", topic, err)
		}
		err = fmt.Errorf("event: publish to %q: %w", topic, err)
	}
	if b.notifier == nil {
		b.wakeTopic(topic)
	}
	return out, err
}

func (b *Bus) wakeTopic(topic string) {
	b.mu.Lock()
	var gs []*group
	for k, g := range b.groups {
		if k.topic == topic {
			gs = append(gs, g)
		}
	}
	b.mu.Unlock()
	for _, g := range gs {
		g.poke()
	}
	b.watchers.wake(topic)
}

// Handler handles one delivery. Unless the subscription uses manual ack,
// returning nil acks the delivery and returning an error nacks it with the
// error's text as the reason. A panic is recovered and nacks.
type Handler func(ctx context.Context, d *Delivery) error

// Subscribe joins group on topic and calls h for each delivery. Several
// subscriptions of one group, in this Bus or in others sharing the store,
// share the work by partition: a partition is served by one of them at a
// time, so with the default single partition one subscription of the group
// gets the records while the others stand by. The start
// position in opts is used only when the group has no committed cursor.
func (b *Bus) Subscribe(ctx context.Context, topic, group string, h Handler, opts ...SubscribeOption) (*Subscription, error) {
	var o SubscribeOptions
	for _, opt := range opts {
		opt(&o)
	}
	var errs []error
	if err := ValidateTopic(topic); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateGroup(group); err != nil {
		errs = append(errs, err)
	}
	if h == nil {
		errs = append(errs, invalid("handler", "nil"))
	}
	if err := o.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := joinErrs(errs); err != nil {
		return nil, err
	}
	o.setDefaults()
	s, err := b.join(ctx, topic, group, h, o, "")
	if err != nil {
		return nil, err
	}
	// Records redriven to the group wait in its redrive topic.
	if err := s.followRedrives(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// join adds a subscription of group on topic; redriveOf names the topic
// of a companion subscription on a redrive topic (whose handler is
// chained already), "" for others.
func (b *Bus) join(ctx context.Context, topic, group string, h Handler, o SubscribeOptions, redriveOf string) (*Subscription, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	// The group's settings are the stored ones: those of the group's
	// topic for a companion subscription on its redrive topic.
	cfgTopic := topic
	if redriveOf != "" {
		cfgTopic = redriveOf
	}
	cfg, err := b.ensureGroup(ctx, cfgTopic, group, o.Group)
	if err != nil {
		return nil, err
	}
	k := groupKey{topic, group}
	g := b.groups[k]
	if g == nil {
		start := cfg
		if redriveOf != "" {
			start.Start = Earliest() // a redrive topic holds only what is to be delivered
		}
		g, err = b.startGroup(ctx, topic, group, cfgTopic, &cfg, &start, &o)
		if err != nil {
			return nil, err
		}
		b.groups[k] = g
	} else {
		g.setConfig(&cfg)
	}
	s := newSubscription(g, h, o, redriveOf)
	g.addSub(s)
	return s, nil
}

// AttemptRef names one delivery attempt of a record in a consumer group,
// as a client that got the delivery over the wire settles it.
type AttemptRef struct {
	Topic, Group string
	// ID is the record's id; Attempt is the delivery's attempt (1 for the
	// first).
	ID      string
	Attempt int
}

// Ack settles the delivery ref names, as [Delivery.Ack] does. It returns
// ErrStaleAck if that attempt's lease has ended and ErrNotInFlight if the
// record is not in flight in this Bus.
func (b *Bus) Ack(ctx context.Context, ref AttemptRef) error {
	return b.conclude(ref, outcome{kind: outAck})
}

// Nack ends the delivery ref names, as [Delivery.Nack] does: the record is
// redelivered after a backoff, or dead-lettered after MaxAttempts.
func (b *Bus) Nack(ctx context.Context, ref AttemptRef, reason string) error {
	return b.conclude(ref, outcome{kind: outNack, reason: reason})
}

// ModAck extends the lease of the delivery ref names to now+extend, as
// [Delivery.ModAck] does.
func (b *Bus) ModAck(ctx context.Context, ref AttemptRef, extend time.Duration) error {
	if extend <= 0 {
		return invalid("extend", "%v, want a positive duration", extend)
	}
	return b.conclude(ref, outcome{kind: outExtend, extend: extend})
}

func (b *Bus) conclude(ref AttemptRef, o outcome) error {
	if b.isClosed() {
		return ErrClosed
	}
	g, err := b.group(ref.Topic, ref.Group)
	if err != nil {
		return err
	}
	err = g.conclude(&Delivery{Record: Record{ID: ref.ID}, DeliveryContext: DeliveryContext{Attempt: ref.Attempt}}, o)
	if errors.Is(err, ErrNotInFlight) && b.concludeRedriven(ref, o) == nil {
		return nil // a redriven delivery, named as it was in its topic
	}
	return err
}

func (b *Bus) group(topic, group string) (*group, error) {
	b.mu.Lock()
	g := b.groups[groupKey{topic, group}]
	b.mu.Unlock()
	if g == nil {
		return nil, fmt.Errorf("%w: no subscription of group %q on topic %q here", ErrNotInFlight, group, topic)
	}
	return g, nil
}

// Cursor returns the committed cursor of group on topic, as stored.
func (b *Bus) Cursor(ctx context.Context, topic, group string) (Cursor, error) {
	if b.isClosed() {
		return Cursor{}, ErrClosed
	}
	if err := errors.Join(ValidateTopic(topic), ValidateGroup(group)); err != nil {
		return Cursor{}, err
	}
	parts, err := b.cfg.Cursors.Cursors(ctx, topic, group)
	if err != nil {
		return Cursor{}, fmt.Errorf("event: read cursor: %w", err)
	}
	if len(parts) == 0 {
		return Cursor{}, fmt.Errorf("%w: cursor of group %q on topic %q", ErrNotFound, group, topic)
	}
	n, err := b.partitionsOf(ctx, topic)
	if err != nil {
		return Cursor{}, err
	}
	c := Cursor{Topic: topic, Group: group, Partitions: parts}
	first := true
	for p := 0; p < n; p++ {
		v := parts[p]
		if first || v < c.Seq {
			c.Seq, first = v, false
		}
	}
	return c, nil
}

// GroupStats is this Bus's member of one consumer group: what it holds
// in memory. [GroupStatus].Local carries it beside what the store tells
// of the group.
type GroupStats struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// Partitions this member owns now.
	Partitions []int `json:"owned_partitions"`
	// InFlight deliveries (leased, not settled).
	InFlight int `json:"in_flight"`
	// Waiting records: to be redelivered or dead-lettered, and, in a
	// key-ordered group, held behind an earlier record of their key.
	Waiting int `json:"waiting"`
	// Held are the records of Waiting held behind their key
	// ([SubscribeOptions.KeyOrdered]).
	Held int `json:"held"`
	// Buffered records read but not delivered yet.
	Buffered int `json:"buffered"`
	// Committed is the lowest seq this member committed over the
	// partitions it owns (the store's cursors: [GroupStatus].Committed).
	Committed uint64 `json:"committed"`
	// Subscribers of the group in this Bus.
	Subscribers int `json:"subscribers"`
}

// Stats returns the member of every group with subscribers in this Bus,
// from memory: it reads nothing from the store, so it is cheap enough
// for every metrics scrape and every test that waits for a count.
// [Bus.GroupStatus] is a group's whole status, read from the store.
func (b *Bus) Stats() []GroupStats {
	b.mu.Lock()
	gs := make([]*group, 0, len(b.groups))
	for _, g := range b.groups {
		gs = append(gs, g)
	}
	b.mu.Unlock()
	out := make([]GroupStats, 0, len(gs))
	for _, g := range gs {
		st := g.stats()
		if st.Partitions == nil {
			st.Partitions = []int{}
		}
		out = append(out, st)
	}
	return out
}

// Done is closed when Close is called: every call of the Bus then
// returns ErrClosed. The gateway (package ws) closes its connections then.
func (b *Bus) Done() <-chan struct{} { return b.done }

func (b *Bus) isClosed() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// Close stops fetching, lets running handlers finish until ctx ends, gives
// unsettled deliveries back, commits cursors and releases partition leases.
// No goroutine of the Bus outlives a Close that returns nil. From the
// start of Close, Publish, NewRecord, Append, Subscribe, Ack, Nack, ModAck,
// Cursor and SetCursor return ErrClosed (handlers still running settle
// their deliveries through [Delivery]).
func (b *Bus) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.done)
	gs := make([]*group, 0, len(b.groups))
	for _, g := range b.groups {
		gs = append(gs, g)
	}
	b.mu.Unlock()
	var errs []error
	for _, g := range gs {
		if err := g.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("event: close: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

func (b *Bus) removeGroup(g *group) {
	b.mu.Lock()
	if b.groups[g.key] == g {
		delete(b.groups, g.key)
	}
	b.mu.Unlock()
}
