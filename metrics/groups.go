package metrics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// Watch registers the gauges read at scrape time from bus and its store.
// Call it once.
//
// From the store, for every group it holds on every topic, whether or not
// this process subscribes to it (over a store that is not an
// [event.Lister], the groups with subscribers in bus only), as
// [event.Bus.GroupStatuses] reads them: lag in events and in seconds, the
// committed cursor, the live members of every process, the pending dead
// letters, and each topic's head. The store is read at most once per
// [Config.GroupsInterval], by the first scrape after it has passed, within
// [Config.ScrapeTimeout]: the topics ([event.Lister.ListTopics]), then
// the groups of each topic at once. The scrapes in between serve the
// values last read. A read that fails keeps the values last read (of
// every topic when the topics cannot be listed, of one topic when its
// groups cannot be read) and counts in
// promlib_consumer_collect_errors_total. The group on dead-letter topics
// that marks their records done ([event.DeadLetterMarksGroup]) is no
// consumer and is left out.
//
// From this process, at every scrape, for every group with subscribers in
// bus ([event.Bus.Stats], read from memory): deliveries in flight, waiting
// and buffered, subscribers and owned partitions.
func (m *BusObserver) Watch(bus *event.Bus) error {
	if !m.on {
		return nil
	}
	if bus == nil {
		return invalid("bus", "nil")
	}
	if !m.watched.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: bus: Watch was already called", ErrInvalid)
	}
	if err := register(m.cfg.Registerer, newBusCollector(m, bus)); err != nil {
		m.watched.Store(false)
		return err
	}
	return nil
}

// groupRow is one group's status as the store last gave it.
type groupRow struct {
	group                                string
	lag, committed, members, deadLetters uint64
	lagSeconds                           float64
}

// topicRows are a topic's head and groups as the store last gave them.
// Never changed once made: a collection replaces them.
type topicRows struct {
	head   uint64
	groups []groupRow
}

// busCollector reads a Bus's groups: every group of the store from the
// cache that refresh keeps, the in-process ones from Bus.Stats.
type busCollector struct {
	m        *BusObserver
	bus      *event.Bus
	clk      clock.Clock
	interval time.Duration
	timeout  time.Duration

	lag, lagSeconds, committed, head, members, deadLetters *prometheus.Desc
	inflight, waiting, buffered, subs, partsOwn            *prometheus.Desc
	collectErrors                                          *prometheus.Desc

	mu     sync.Mutex // one collection at a time; guards what follows
	next   time.Time  // the time of the next collection
	topics map[string]*topicRows
	errors uint64
}

func newBusCollector(m *BusObserver, bus *event.Bus) *busCollector {
	tg := []string{"topic", "group"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	return &busCollector{
		m: m, bus: bus, clk: m.cfg.Clock, interval: m.cfg.GroupsInterval, timeout: m.cfg.ScrapeTimeout,
		lag:         d("consumer_lag", "Records of the topic above the group's committed cursor (head - committed), for every group of the store.", tg...),
		lagSeconds:  d("consumer_lag_seconds", "Age of the oldest record the group has not settled; 0 when it is caught up. Every group of the store.", tg...),
		committed:   d("consumer_committed_seq", "The group's committed cursor: every record at or below it is settled. Every group of the store.", tg...),
		members:     d("consumer_members", "Live members of the group, in every process. Every group of the store.", tg...),
		deadLetters: d("consumer_dead_letters_pending", "Dead letters of the group neither redriven nor purged (a lower bound past 1,024 pending records of its dead-letter topic). Every group of the store.", tg...),
		head:        d("topic_head_seq", "The highest seq of the topic. Every topic of the store.", "topic"),
		inflight:    d("events_in_flight", "Deliveries leased and not settled, in this process.", tg...),
		waiting:     d("events_waiting", "Records waiting for redelivery or dead-lettering, in this process.", tg...),
		buffered:    d("events_buffered", "Records read from the store and not delivered yet, in this process.", tg...),
		subs:        d("consumer_subscribers", "Subscriptions of the group in this process.", tg...),
		partsOwn:    d("consumer_partitions_owned", "Partitions of the topic this process owns for the group.", tg...),
		collectErrors: d("consumer_collect_errors_total",
			"Reads of the store's groups that failed (the topics, or the groups of a topic); the gauges of what was not read keep their last values."),
	}
}

// Describe implements prometheus.Collector.
func (c *busCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lag, c.lagSeconds, c.committed, c.members, c.deadLetters, c.head,
		c.inflight, c.waiting, c.buffered, c.subs, c.partsOwn, c.collectErrors} {
		ch <- d
	}
}

// refresh reads the store's groups if GroupsInterval has passed since
// the last read, and returns the groups by topic and the failed reads so
// far.
func (c *busCollector) refresh() (map[string]*topicRows, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.bus.Done():
		// A closed Bus reads nothing more: serve no stale values.
		c.topics = nil
		return nil, c.errors
	default:
	}
	now := c.clk.Now()
	if now.Before(c.next) {
		return c.topics, c.errors
	}
	c.next = now.Add(c.interval)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	topics, err := c.collect(ctx)
	if err != nil {
		c.errors++
	}
	c.topics = topics
	return topics, c.errors
}

// collect reads the status of every group of every topic: one listing of
// the topics, then one [event.Bus.GroupStatuses] per topic. What it
// cannot read keeps the values last read. Called with c.mu held.
func (c *busCollector) collect(ctx context.Context) (map[string]*topicRows, error) {
	heads := make(map[string]uint64)
	if l, ok := c.bus.Store().(event.Lister); ok {
		ts, err := l.ListTopics(ctx)
		if err != nil {
			return c.topics, fmt.Errorf("metrics: list topics: %w", err)
		}
		for _, t := range ts {
			heads[t.Topic] = t.LastSeq
		}
	}
	for _, st := range c.bus.Stats() {
		if _, ok := heads[st.Topic]; !ok {
			heads[st.Topic] = 0
		}
	}
	out := make(map[string]*topicRows, len(heads))
	var errs []error
	for _, topic := range slices.Sorted(maps.Keys(heads)) {
		sts, err := c.bus.GroupStatuses(ctx, topic)
		if err != nil {
			errs = append(errs, fmt.Errorf("metrics: groups of %q: %w", topic, err))
			if old := c.topics[topic]; old != nil {
				out[topic] = old
			}
			continue
		}
		tr := &topicRows{head: heads[topic]}
		for _, st := range sts {
			if st.Group == event.DeadLetterMarksGroup {
				continue
			}
			tr.head = max(tr.head, st.Head)
			tr.groups = append(tr.groups, groupRow{
				group: st.Group, lag: st.Lag, committed: st.Committed,
				members: uint64(len(st.Members)), deadLetters: st.DeadLetters.Pending,
				lagSeconds: float64(st.LagMs) / 1000,
			})
		}
		out[topic] = tr
	}
	return out, errors.Join(errs...)
}

// storeSums add up the groups of the store that share labels (beyond the
// bounds).
type storeSums struct {
	lag, lagSeconds, members, deadLetters float64
	committed                             uint64
}

// localSums add up this process's groups that share labels.
type localSums struct {
	inflight, waiting, buffered, subs, owned float64
}

// Collect implements prometheus.Collector.
func (c *busCollector) Collect(ch chan<- prometheus.Metric) {
	topics, failed := c.refresh()
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}

	store := make(map[pair]*storeSums)
	heads := make(map[string]uint64)
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		tr := topics[topic]
		lt := c.m.topics.value(topic)
		if lt != OtherLabel {
			heads[lt] = tr.head
		}
		for _, g := range tr.groups {
			k := pair{lt, c.m.groups.value(g.group)}
			s := store[k]
			if s == nil {
				s = &storeSums{}
				store[k] = s
			}
			s.lag += float64(g.lag)
			s.lagSeconds = max(s.lagSeconds, g.lagSeconds)
			s.members += float64(g.members)
			s.deadLetters += float64(g.deadLetters)
			s.committed = g.committed
		}
	}
	for k, s := range store {
		gauge(c.lag, s.lag, k.topic, k.group)
		gauge(c.lagSeconds, s.lagSeconds, k.topic, k.group)
		gauge(c.members, s.members, k.topic, k.group)
		gauge(c.deadLetters, s.deadLetters, k.topic, k.group)
		if k.topic != OtherLabel && k.group != OtherLabel {
			gauge(c.committed, float64(s.committed), k.topic, k.group)
		}
	}
	for t, h := range heads {
		gauge(c.head, float64(h), t)
	}

	local := make(map[pair]*localSums)
	for _, st := range c.bus.Stats() {
		// Start the counters of a group at 0 once it subscribes, so that
		// rate() sees its first events.
		c.m.group(st.Topic, st.Group)
		c.m.topic(st.Topic)
		k := c.m.labels(st.Topic, st.Group)
		s := local[k]
		if s == nil {
			s = &localSums{}
			local[k] = s
		}
		s.inflight += float64(st.InFlight)
		s.waiting += float64(st.Waiting)
		s.buffered += float64(st.Buffered)
		s.subs += float64(st.Subscribers)
		s.owned += float64(len(st.Partitions))
	}
	for k, s := range local {
		gauge(c.inflight, s.inflight, k.topic, k.group)
		gauge(c.waiting, s.waiting, k.topic, k.group)
		gauge(c.buffered, s.buffered, k.topic, k.group)
		gauge(c.subs, s.subs, k.topic, k.group)
		gauge(c.partsOwn, s.owned, k.topic, k.group)
	}
	ch <- prometheus.MustNewConstMetric(c.collectErrors, prometheus.CounterValue, float64(failed))
}
