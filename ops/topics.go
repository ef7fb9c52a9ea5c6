package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/event"
)

// TopicState is a topic as /ops/topics shows it.
type TopicState struct {
	// TopicInfo is what the store's [event.Lister] tells of the topic:
	// its name and counts (zero counts and Bytes -1 without a Lister).
	event.TopicInfo
	// Partitions is the topic's partition count as the store keeps it
	// ([event.TopicStore]); 0 when the store keeps no topic settings or
	// the topic has none yet.
	Partitions int `json:"partitions"`
	// Head is the highest seq of the topic.
	Head uint64 `json:"head"`
	// Floor is the retention floor, when the store prunes ([event.Pruner]):
	// every record below it was deleted.
	Floor uint64 `json:"floor,omitempty"`
	// Groups are the status of each known group of the topic
	// ([event.Bus.GroupStatuses], and those of Config.Groups the store
	// knows).
	Groups []event.GroupStatus `json:"groups"`
	// InFlight, Waiting, Held and Buffered sum those of the groups in
	// this Bus (their Local).
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	Held     int `json:"held"`
	Buffered int `json:"buffered"`
	// DLQ sums up the dead letters of the topic: Pending (and More) over
	// the groups shown, each in its own dead-letter topic; Topic and Head
	// are those of the topic's default dead-letter topic ("<topic>.dlq").
	// Absent for a topic that is itself one (its name ends in ".dlq").
	DLQ *event.DeadLetterSummary `json:"dlq,omitempty"`
}

// statsByGroup indexes the Bus's group stats.
type statsByGroup map[[2]string]event.GroupStats

func (h *Handler) stats() statsByGroup {
	m := make(statsByGroup)
	for _, st := range h.bus.Stats() {
		m[[2]string{st.Topic, st.Group}] = st
	}
	return m
}

// Topics returns the topics the handler knows, sorted: those of
// Config.Topics, those with subscribers in the Bus and those the
// TopicLister lists. It is the host's view: /ops/topics shows a caller
// only those it may inspect.
func (h *Handler) Topics(ctx context.Context) ([]string, error) {
	return h.topics(ctx, h.stats())
}

func (h *Handler) topics(ctx context.Context, stats statsByGroup) ([]string, error) {
	names, _, err := h.topicInfos(ctx, stats)
	return names, err
}

// topicInfos returns the known topics, sorted, and what the Lister tells
// of them.
func (h *Handler) topicInfos(ctx context.Context, stats statsByGroup) ([]string, map[string]event.TopicInfo, error) {
	ts := slices.Clone(h.cfg.Topics)
	for k := range stats {
		ts = append(ts, k[0])
	}
	infos := make(map[string]event.TopicInfo)
	if h.cfg.Lister != nil {
		more, err := h.cfg.Lister.ListTopics(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("ops: list topics: %w", err)
		}
		for _, ti := range more {
			ts = append(ts, ti.Topic)
			infos[ti.Topic] = ti
		}
	}
	slices.Sort(ts)
	return slices.Compact(ts), infos, nil
}

// groups returns the known groups of topic, sorted.
func (h *Handler) groups(ctx context.Context, topic string, stats statsByGroup) ([]string, error) {
	names, _, err := h.groupInfos(ctx, topic, stats)
	return names, err
}

// groupInfos returns the known groups of topic, sorted, and what the
// Lister tells of them.
func (h *Handler) groupInfos(ctx context.Context, topic string, stats statsByGroup) ([]string, map[string]event.GroupInfo, error) {
	gs := slices.Clone(h.cfg.Groups[topic])
	for k := range stats {
		if k[0] == topic {
			gs = append(gs, k[1])
		}
	}
	infos := make(map[string]event.GroupInfo)
	if h.cfg.Lister != nil {
		more, err := h.cfg.Lister.ListGroups(ctx, topic)
		if err != nil {
			return nil, nil, fmt.Errorf("ops: list groups of %q: %w", topic, err)
		}
		for _, gi := range more {
			gs = append(gs, gi.Group)
			infos[gi.Group] = gi
		}
	}
	slices.Sort(gs)
	return slices.Compact(gs), infos, nil
}

// TopicState returns the state of topic and the status of its known
// groups. Over HTTP, a group the caller may not inspect is left out.
func (h *Handler) TopicState(ctx context.Context, topic string) (TopicState, error) {
	if err := event.ValidateTopic(topic); err != nil {
		return TopicState{}, err
	}
	_, infos, err := h.topicInfos(ctx, h.stats())
	if err != nil {
		return TopicState{}, err
	}
	return h.topicState(ctx, topic, infos, everything)
}

func (h *Handler) topicState(ctx context.Context, topic string, infos map[string]event.TopicInfo, show visible) (TopicState, error) {
	st := h.bus.Store()
	head, err := st.Head(ctx, topic)
	if err != nil {
		return TopicState{}, fmt.Errorf("ops: head of %q: %w", topic, err)
	}
	info, ok := infos[topic]
	if !ok {
		info = event.TopicInfo{Topic: topic, Bytes: -1}
	}
	ts := TopicState{TopicInfo: info, Head: head, Groups: []event.GroupStatus{}}
	if tst, ok := st.(event.TopicStore); ok {
		// Read, not created: a look at a topic changes nothing.
		c, err := tst.Topic(ctx, topic)
		switch {
		case err == nil:
			ts.Partitions = c.Partitions
		case !errors.Is(err, event.ErrNotFound):
			return TopicState{}, fmt.Errorf("ops: settings of %q: %w", topic, err)
		}
	}
	if pr, ok := st.(event.Pruner); ok {
		if ts.Floor, err = pr.Floor(ctx, topic); err != nil {
			return TopicState{}, fmt.Errorf("ops: floor of %q: %w", topic, err)
		}
	}
	if ts.Groups, err = h.groupStatuses(ctx, topic, show); err != nil {
		return TopicState{}, err
	}
	var dlq event.DeadLetterSummary
	for _, g := range ts.Groups {
		dlq.Pending += g.DeadLetters.Pending
		dlq.More = dlq.More || g.DeadLetters.More
		if l := g.Local; l != nil {
			ts.InFlight += l.InFlight
			ts.Waiting += l.Waiting
			ts.Held += l.Held
			ts.Buffered += l.Buffered
		}
	}
	if !event.IsDeadLetterTopic(topic) {
		dlq.Topic = event.DeadLetterTopic(topic)
		if dlq.Head, err = st.Head(ctx, dlq.Topic); err != nil {
			return TopicState{}, fmt.Errorf("ops: head of %q: %w", dlq.Topic, err)
		}
		ts.DLQ = &dlq
	}
	return ts, nil
}

// groupStatuses returns the status of each group of topic that show
// allows: those the Bus knows ([event.Bus.GroupStatuses]) and those of
// Config.Groups that the store knows, sorted.
func (h *Handler) groupStatuses(ctx context.Context, topic string, show visible) ([]event.GroupStatus, error) {
	all, err := h.bus.GroupStatuses(ctx, topic)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(all))
	for _, g := range all {
		known[g.Group] = true
	}
	for _, g := range h.cfg.Groups[topic] {
		if known[g] || !show(topic, g) {
			continue
		}
		known[g] = true
		st, err := h.bus.GroupStatus(ctx, topic, g)
		if errors.Is(err, event.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		all = append(all, st)
	}
	out := make([]event.GroupStatus, 0, len(all))
	for _, g := range all {
		if show(topic, g.Group) {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b event.GroupStatus) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}

// TopicsResponse is the body of GET /ops/topics.
type TopicsResponse struct {
	Topics []TopicState `json:"topics"`
	// Now is the server's time, Unix ms.
	Now int64 `json:"now"`
}

func (h *Handler) topicsEndpoint(r *http.Request, p params) (any, error) {
	only, err := p.topic("topic", false)
	if err != nil {
		return nil, err
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	if err := h.check(r, acl.Inspect, only, ""); err != nil {
		return nil, err
	}
	ctx := r.Context()
	show := inspectable(ctx)
	stats := h.stats()
	all, infos, err := h.topicInfos(ctx, stats)
	if err != nil {
		return nil, err
	}
	topics := []string{only}
	if only == "" {
		topics = all
	}
	resp := TopicsResponse{Topics: make([]TopicState, 0, len(topics)), Now: h.cfg.Clock.Now().UnixMilli()}
	for _, t := range topics {
		if !show(t, "") {
			continue
		}
		ts, err := h.topicState(ctx, t, infos, show)
		if err != nil {
			return nil, err
		}
		resp.Topics = append(resp.Topics, ts)
	}
	return resp, nil
}

// CursorsResponse is the body of GET /ops/cursors.
type CursorsResponse struct {
	Topic   string         `json:"topic"`
	Head    uint64         `json:"head"`
	Cursors []event.Cursor `json:"cursors"`
}

func (h *Handler) cursorsEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", true)
	if err != nil {
		return nil, err
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	if err := h.check(r, acl.Inspect, topic, ""); err != nil {
		return nil, err
	}
	ctx := r.Context()
	head, err := h.bus.Store().Head(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("ops: head of %q: %w", topic, err)
	}
	groups, err := h.groups(ctx, topic, h.stats())
	if err != nil {
		return nil, err
	}
	show := inspectable(ctx)
	resp := CursorsResponse{Topic: topic, Head: head, Cursors: []event.Cursor{}}
	for _, g := range groups {
		if !show(topic, g) {
			continue
		}
		c, err := h.bus.Cursor(ctx, topic, g)
		if errors.Is(err, event.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		resp.Cursors = append(resp.Cursors, c)
	}
	return resp, nil
}

func (h *Handler) lagEndpoint(r *http.Request, p params) (any, error) {
	topic, group, err := p.topicAndGroup()
	if err != nil {
		return nil, err
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	if err := h.check(r, acl.Inspect, topic, group); err != nil {
		return nil, err
	}
	return h.bus.GroupStatus(r.Context(), topic, group)
}

// InflightResponse is the body of GET /ops/inflight: the groups with
// subscribers in this Bus that the caller may inspect, sorted, and their
// sums.
type InflightResponse struct {
	Groups   []event.GroupStats `json:"groups"`
	InFlight int                `json:"in_flight"`
	Waiting  int                `json:"waiting"`
	Held     int                `json:"held"`
	Buffered int                `json:"buffered"`
	// With group: Deliveries are the group's unsettled records in this
	// Bus (state, attempt, lease or backoff end), Attempts the attempts of
	// every member as the store's group state holds them (members write
	// them with their cursor commits, so a record just delivered may not
	// show there yet).
	Deliveries []event.DeliveryState `json:"deliveries,omitempty"`
	Attempts   []UnsettledRecord     `json:"attempts,omitempty"`
}

// UnsettledRecord is a record a group has delivered and not settled, as
// the store's group state tells, whichever member holds it.
type UnsettledRecord struct {
	Partition int    `json:"partition"`
	Seq       uint64 `json:"seq"`
	Attempts  int    `json:"attempts"`
}

// attempts reads the group state of each partition of group that the
// Lister lists.
func (h *Handler) attempts(ctx context.Context, topic, group string) ([]UnsettledRecord, error) {
	gss, ok := h.bus.Store().(event.GroupStateStore)
	if !ok || h.cfg.Lister == nil {
		return []UnsettledRecord{}, nil
	}
	gs, err := h.cfg.Lister.ListGroups(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("ops: list groups of %q: %w", topic, err)
	}
	out := []UnsettledRecord{}
	for _, g := range gs {
		if g.Group != group {
			continue
		}
		for _, p := range g.Partitions {
			st, err := gss.GroupState(ctx, event.PartitionRef{Topic: topic, Group: group, Partition: p.Partition})
			if err != nil {
				return nil, fmt.Errorf("ops: group state of %q/%q: %w", topic, group, err)
			}
			for seq, n := range st.Attempts {
				out = append(out, UnsettledRecord{Partition: p.Partition, Seq: seq, Attempts: n})
			}
		}
	}
	slices.SortFunc(out, func(a, b UnsettledRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

func (h *Handler) inflightEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", false)
	if err != nil {
		return nil, err
	}
	group, err := p.group("group", false)
	if err != nil {
		return nil, err
	}
	if group != "" && topic == "" {
		return nil, invalid("topic", "required with group")
	}
	if err := h.ready(r, p, acl.Inspect, topic, group); err != nil {
		return nil, err
	}
	show := inspectable(r.Context())
	resp := InflightResponse{Groups: []event.GroupStats{}}
	for _, st := range h.bus.Stats() {
		if (topic != "" && st.Topic != topic) || (group != "" && st.Group != group) || !show(st.Topic, st.Group) {
			continue
		}
		resp.Groups = append(resp.Groups, st)
		resp.InFlight += st.InFlight
		resp.Waiting += st.Waiting
		resp.Held += st.Held
		resp.Buffered += st.Buffered
	}
	slices.SortFunc(resp.Groups, func(a, b event.GroupStats) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	if group != "" {
		resp.Deliveries = h.bus.Deliveries(topic, group)
		if resp.Attempts, err = h.attempts(r.Context(), topic, group); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// LatestResponse is the body of GET /ops/latest.
type LatestResponse struct {
	Topic  string       `json:"topic"`
	Key    string       `json:"key"`
	Record event.Record `json:"record"`
}

// maxKeyLen bounds the key parameter of /ops/latest.
const maxKeyLen = 1024

func (h *Handler) latestEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", true)
	if err != nil {
		return nil, err
	}
	key := p.str("key")
	switch {
	case !p.v.Has("key"):
		return nil, invalid("key", "required")
	case key == "":
		return nil, invalid("key", "must not be empty")
	case len(key) > maxKeyLen:
		return nil, invalid("key", "%d bytes, more than %d", len(key), maxKeyLen)
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	if err := h.check(r, acl.Inspect, topic, ""); err != nil {
		return nil, err
	}
	ks, ok := h.bus.Store().(event.KeyStore)
	if !ok {
		return nil, fmt.Errorf("%w: latest by key needs a store that implements event.KeyStore", ErrNotSupported)
	}
	recs, err := ks.LatestByKey(r.Context(), topic, []string{key})
	if err != nil {
		return nil, fmt.Errorf("ops: latest by key in %q: %w", topic, err)
	}
	rec, ok := recs[key]
	if !ok {
		return nil, fmt.Errorf("%w: no record with key %q in topic %q", ErrNotFound, key, topic)
	}
	return LatestResponse{Topic: topic, Key: key, Record: rec}, nil
}
