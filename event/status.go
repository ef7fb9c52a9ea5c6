package event

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// GroupStatus is the state of a consumer group on a topic, in one place:
// its settings, where it is (cursors, lag), who runs it (members,
// partition owners), what it holds (unsettled records, dead letters) and,
// when it has subscribers in this Bus, this Bus's member's own counts.
// [Bus.GroupStatus] and [Bus.GroupStatuses] read it from the store.
type GroupStatus struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// Config is the group's stored settings with the defaults filled in
	// ([GroupStore]); nil for a group without (one that only an older
	// release subscribed).
	Config *GroupConfig `json:"config,omitempty"`
	// Head is the highest seq of the topic.
	Head uint64 `json:"head"`
	// Committed is the group's committed cursor: the lowest over its
	// partitions (a partition without one counts as 0). Every record at
	// or below it is settled. Cursors are committed every
	// [Config].CommitInterval, so an ack shows after that.
	Committed uint64 `json:"committed"`
	// Partitions are the partitions of the topic, by number, with the
	// group's cursor of each (0 for none yet), owner (the member holding
	// its live lease, "" for none) and unsettled records (InFlight:
	// delivered and not settled, over all members).
	Partitions []PartitionInfo `json:"partitions"`
	// Lag is Head - Committed, in records: those the group has not
	// settled, exact with one partition. With several, it also counts the
	// records above Committed of partitions whose cursor is ahead, so it
	// is an upper bound.
	Lag uint64 `json:"lag"`
	// LagMs is the age of the oldest record the group has not settled, by
	// the Bus's clock: now minus its ts; 0 when Lag is 0. With several
	// partitions whose cursors differ, the first record above its
	// partition's cursor among the first 1,024 after Committed; failing
	// that, the first one after Committed (an upper bound).
	LagMs int64 `json:"lag_ms"`
	// Oldest is that record, when Lag > 0.
	Oldest *RecordRef `json:"oldest,omitempty"`
	// Members are the live members, sorted: those the store lists (every
	// process), or, over a store that is not a [Lister], this Bus's member
	// when it has subscribers of the group.
	Members []string `json:"members"`
	// Unsettled counts the records above the cursors that were delivered
	// and are not settled yet, over all members: in flight, or waiting for
	// a redelivery (the sum of the partitions' InFlight). Over a store
	// that is not a Lister, this Bus's only.
	Unsettled int `json:"unsettled"`
	// LastActive is the Unix ms until which the group was last known to
	// be in use (see [GroupInfo].LastActive); 0 when the store knows none
	// or is not a Lister.
	LastActive int64 `json:"last_active"`
	// DeadLetters sums up the group's dead letters (see [Bus.DeadLetters]).
	DeadLetters DeadLetterSummary `json:"dead_letters"`
	// Local is this Bus's member of the group (see [Bus.Stats]); nil
	// when the group has no subscribers in this Bus.
	Local *GroupStats `json:"local,omitempty"`
}

// GroupStatus returns the status of group on topic, or an error wrapping
// ErrNotFound for a group the store does not know (no cursor, no
// settings, no summary) and that has no subscribers in this Bus. It
// reads the store: the group's cursors, the topic's head and partition
// count, the groups of the topic (a [Lister]), the group's settings when
// the listing has none, the records after the cursor when the group is
// behind (to find the oldest), and the group's dead-letter topic when it
// holds dead letters not done.
func (b *Bus) GroupStatus(ctx context.Context, topic, group string) (GroupStatus, error) {
	if b.isClosed() {
		return GroupStatus{}, ErrClosed
	}
	if err := errors.Join(ValidateTopic(topic), ValidateGroup(group)); err != nil {
		return GroupStatus{}, err
	}
	r, err := b.newStatusReader(ctx, topic)
	if err != nil {
		return GroupStatus{}, err
	}
	st, ok, err := r.status(ctx, group)
	if err != nil {
		return GroupStatus{}, err
	}
	if !ok {
		return GroupStatus{}, fmt.Errorf("%w: group %q on topic %q", ErrNotFound, group, topic)
	}
	return st, nil
}

// GroupStatuses returns the status of every group of topic, sorted by
// name: those the store lists (a [Lister]) and those with subscribers in
// this Bus (only those, over a store that is not a Lister). It reads the
// store as [Bus.GroupStatus] does for each group, the topic's head, its
// groups and each dead-letter topic once.
func (b *Bus) GroupStatuses(ctx context.Context, topic string) ([]GroupStatus, error) {
	if b.isClosed() {
		return nil, ErrClosed
	}
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	r, err := b.newStatusReader(ctx, topic)
	if err != nil {
		return nil, err
	}
	names := slices.Collect(maps.Keys(r.infos))
	b.mu.Lock()
	for k := range b.groups {
		if k.topic == topic {
			names = append(names, k.group)
		}
	}
	b.mu.Unlock()
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]GroupStatus, 0, len(names))
	for _, g := range names {
		st, ok, err := r.status(ctx, g)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, st)
		}
	}
	return out, nil
}

// statusReader reads the statuses of groups of one topic, reading what
// they share once.
type statusReader struct {
	b     *Bus
	topic string
	now   time.Time
	head  uint64
	parts int                   // the topic's partition count; 0: not known
	infos map[string]*GroupInfo // what the Lister lists; empty without one
	dlq   map[string]*deadLetterCounts
}

func (b *Bus) newStatusReader(ctx context.Context, topic string) (*statusReader, error) {
	r := &statusReader{b: b, topic: topic, now: b.clk.Now(), infos: map[string]*GroupInfo{}, dlq: map[string]*deadLetterCounts{}}
	var err error
	if r.head, err = b.store.Head(ctx, topic); err != nil {
		return nil, fmt.Errorf("event: head of %q: %w", topic, err)
	}
	if r.parts, err = b.knownPartitions(ctx, topic); err != nil {
		return nil, err
	}
	if l, ok := b.store.(Lister); ok {
		gs, err := l.ListGroups(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("event: list groups of %q: %w", topic, err)
		}
		for i := range gs {
			r.infos[gs[i].Group] = &gs[i]
		}
	}
	return r, nil
}

// knownPartitions returns the partition count of topic as known, without
// creating the topic's settings (a look changes nothing): 0 for a topic
// that has none in a [TopicStore].
func (b *Bus) knownPartitions(ctx context.Context, topic string) (int, error) {
	if b.topics == nil {
		return b.cfg.Partitions, nil
	}
	c, err := b.topics.Topic(ctx, topic)
	switch {
	case errors.Is(err, ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("event: settings of topic %q: %w", topic, err)
	}
	return c.Partitions, nil
}

// status returns the status of group, and false for a group that is not
// known.
func (r *statusReader) status(ctx context.Context, group string) (GroupStatus, bool, error) {
	b, topic := r.b, r.topic
	st := GroupStatus{Topic: topic, Group: group, Head: r.head, Partitions: []PartitionInfo{}, Members: []string{}}
	cursors, err := b.cfg.Cursors.Cursors(ctx, topic, group)
	if err != nil {
		return st, false, fmt.Errorf("event: read cursor of group %q on %q: %w", group, topic, err)
	}
	gi := r.infos[group]
	if gi != nil && gi.Config != nil {
		c := *gi.Config
		st.Config = &c
	} else {
		c, err := b.cfg.Groups.GroupConfig(ctx, topic, group)
		switch {
		case err == nil:
			st.Config = &c
		case !errors.Is(err, ErrNotFound):
			return st, false, fmt.Errorf("event: settings of group %q on %q: %w", group, topic, err)
		}
	}
	if st.Config != nil {
		st.Config.setDefaults(topic)
	}
	b.mu.Lock()
	g := b.groups[groupKey{topic, group}]
	b.mu.Unlock()
	if g != nil {
		s := g.stats()
		if s.Partitions == nil {
			s.Partitions = []int{}
		}
		st.Local = &s
	}
	if gi == nil && len(cursors) == 0 && st.Config == nil && g == nil {
		return st, false, nil
	}

	n := r.parts
	for p := range cursors {
		n = max(n, p+1)
	}
	owners := map[int]PartitionInfo{}
	if gi != nil {
		for _, p := range gi.Partitions {
			owners[p.Partition] = p
		}
	}
	for p := 0; p < n; p++ {
		o := owners[p]
		pi := PartitionInfo{Partition: p, Cursor: cursors[p], Owner: o.Owner, InFlight: o.InFlight}
		if p == 0 || pi.Cursor < st.Committed {
			st.Committed = pi.Cursor
		}
		st.Partitions = append(st.Partitions, pi)
	}
	if err := b.lag(ctx, &st, r.now); err != nil {
		return st, false, err
	}
	switch {
	case gi != nil:
		st.Members = append(st.Members, gi.Members...)
		st.Unsettled, st.LastActive = gi.InFlight, gi.LastActive
	case st.Local != nil:
		st.Unsettled = st.Local.InFlight + st.Local.Waiting
	}
	if len(st.Members) == 0 && g != nil {
		st.Members = []string{g.member}
	}

	dlq := DeadLetterTopic(topic)
	if st.Config != nil {
		dlq = st.Config.DeadLetterTopic
	}
	c := r.dlq[dlq]
	if c == nil {
		cs, err := b.countDeadLetters(ctx, dlq)
		if err != nil {
			return st, false, err
		}
		c = &cs
		r.dlq[dlq] = c
	}
	st.DeadLetters = c.summary(dlq, topic, group)
	return st, true, nil
}
