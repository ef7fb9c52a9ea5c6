package metrics

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/event"
)

// Bus holds the metrics of an [event.Bus]. It is the bus's
// [event.Observer] and has a publish and a delivery interceptor: configure
// the bus with [Bus.Instrument], then call [Bus.Watch] with the bus for
// the gauges read at scrape time (lag, in flight). Made with a nil
// Registerer it does nothing.
type Bus struct {
	on     bool
	cfg    Config
	topics *labelSet
	groups *labelSet

	published     *prometheus.CounterVec
	delivered     *prometheus.CounterVec
	redelivered   *prometheus.CounterVec
	acked         *prometheus.CounterVec
	nacked        *prometheus.CounterVec
	expired       *prometheus.CounterVec
	deadLettered  *prometheus.CounterVec
	skipped       *prometheus.CounterVec
	groupsExpired *prometheus.CounterVec
	handlerErrors *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	handlerTime   *prometheus.HistogramVec

	byTopic sync.Map // topic label -> prometheus.Counter (published)
	byGroup sync.Map // pair of labels -> *groupSeries

	watched atomic.Bool
}

var _ event.Observer = (*Bus)(nil)

// groupSeries are the series of one (topic, group), resolved once so
// that the hot paths do no label hashing.
type groupSeries struct {
	delivered, redelivered, acked, nacked, expired, deadLettered, skipped, handlerErrors prometheus.Counter
	latency, handlerTime                                                                 prometheus.Observer
}

// NewBus returns the bus metrics, registered with cfg.Registerer.
func NewBus(cfg Config) (*Bus, error) {
	cfg, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	m := &Bus{on: cfg.Registerer != nil, cfg: cfg, topics: newLabelSet(cfg.MaxTopics), groups: newLabelSet(cfg.MaxGroups)}
	if !m.on {
		return m, nil
	}
	tg := []string{"topic", "group"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	m.published = counter("events_published_total", "Records accepted by a publish, including idempotent repeats of a stored id.", "topic")
	m.delivered = counter("events_delivered_total", "Deliveries to subscribers, redeliveries included.", tg...)
	m.redelivered = counter("events_redelivered_total", "Deliveries after the first attempt (after a nack or an expired lease).", tg...)
	m.acked = counter("events_acked_total", "Deliveries acked.", tg...)
	m.nacked = counter("events_nacked_total", "Deliveries nacked.", tg...)
	m.expired = counter("events_expired_total", "Deliveries whose lease ended without an ack.", tg...)
	m.deadLettered = counter("events_dead_lettered_total", "Records moved to the dead-letter topic.", tg...)
	m.skipped = counter("events_skipped_total", "Records deleted by retention before the group could read them.", tg...)
	m.groupsExpired = counter("groups_expired_total", "Consumer groups deleted by their expiration policy (by topic: expired groups are many and gone).", "topic")
	m.handlerErrors = counter("handler_errors_total", "Handler calls that returned an error or panicked.", tg...)
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "delivery_latency_seconds",
		Help:    "Time from a record's ts (its publish) to its ack.",
		Buckets: cfg.LatencyBuckets,
	}, tg)
	m.handlerTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "handler_duration_seconds",
		Help:    "Duration of handler calls of Go subscriptions.",
		Buckets: cfg.DurationBuckets,
	}, tg)
	if err := register(cfg.Registerer, m.published, m.delivered, m.redelivered, m.acked, m.nacked, m.expired,
		m.deadLettered, m.skipped, m.groupsExpired, m.handlerErrors, m.latency, m.handlerTime); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers cs, or none of them.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	return nil
}

func (m *Bus) topic(topic string) prometheus.Counter {
	if c, ok := m.byTopic.Load(topic); ok {
		return c.(prometheus.Counter)
	}
	lt := m.topics.value(topic)
	if c, ok := m.byTopic.Load(lt); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.byTopic.LoadOrStore(lt, m.published.WithLabelValues(lt))
	return c.(prometheus.Counter)
}

func (m *Bus) labels(topic, group string) pair {
	return pair{m.topics.value(topic), m.groups.value(group)}
}

func (m *Bus) group(topic, group string) *groupSeries {
	if s, ok := m.byGroup.Load(pair{topic, group}); ok {
		return s.(*groupSeries)
	}
	// Series are kept under their label values: a topic or group beyond
	// the bounds shares the OtherLabel series and adds no entry.
	k := m.labels(topic, group)
	if s, ok := m.byGroup.Load(k); ok {
		return s.(*groupSeries)
	}
	lv := []string{k.topic, k.group}
	s := &groupSeries{
		delivered:     m.delivered.WithLabelValues(lv...),
		redelivered:   m.redelivered.WithLabelValues(lv...),
		acked:         m.acked.WithLabelValues(lv...),
		nacked:        m.nacked.WithLabelValues(lv...),
		expired:       m.expired.WithLabelValues(lv...),
		deadLettered:  m.deadLettered.WithLabelValues(lv...),
		skipped:       m.skipped.WithLabelValues(lv...),
		handlerErrors: m.handlerErrors.WithLabelValues(lv...),
		latency:       m.latency.WithLabelValues(lv...),
		handlerTime:   m.handlerTime.WithLabelValues(lv...),
	}
	got, _ := m.byGroup.LoadOrStore(k, s)
	return got.(*groupSeries)
}

// Instrument returns cfg with m as its Observer and m's interceptors after
// cfg's own:
//
//	bus, err := event.NewBus(store, bm.Instrument(event.Config{}))
func (m *Bus) Instrument(cfg event.Config) event.Config {
	cfg.Observer = m
	cfg.PublishInterceptors = append(slices.Clip(cfg.PublishInterceptors), m.PublishInterceptor())
	cfg.DeliveryInterceptors = append(slices.Clip(cfg.DeliveryInterceptors), m.DeliveryInterceptor())
	return cfg
}

// PublishInterceptor counts the records accepted by each publish,
// idempotent repeats of a stored id included.
func (m *Bus) PublishInterceptor() event.PublishInterceptor {
	return func(next event.PublishFunc) event.PublishFunc {
		if !m.on {
			return next
		}
		return func(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
			out, err := next(ctx, topic, recs)
			if err == nil {
				m.topic(topic).Add(float64(len(out)))
			}
			return out, err
		}
	}
}

// DeliveryInterceptor times each handler call and counts those that
// return an error or panic.
func (m *Bus) DeliveryInterceptor() event.DeliveryInterceptor {
	return func(next event.Handler) event.Handler {
		if !m.on {
			return next
		}
		return func(ctx context.Context, d *event.Delivery) error {
			start := time.Now()
			err := next(ctx, d)
			m.handled(d.Topic, d.Group, time.Since(start), err)
			return err
		}
	}
}

// Delivered implements [event.Observer].
func (m *Bus) Delivered(topic, group string, attempt int) {
	if !m.on {
		return
	}
	s := m.group(topic, group)
	s.delivered.Inc()
	if attempt > 1 {
		s.redelivered.Inc()
	}
}

// Acked implements [event.Observer].
func (m *Bus) Acked(topic, group string, age time.Duration) {
	if !m.on {
		return
	}
	s := m.group(topic, group)
	s.acked.Inc()
	s.latency.Observe(max(age, 0).Seconds())
}

// Nacked implements [event.Observer].
func (m *Bus) Nacked(topic, group string) {
	if m.on {
		m.group(topic, group).nacked.Inc()
	}
}

// Expired implements [event.Observer].
func (m *Bus) Expired(topic, group string) {
	if m.on {
		m.group(topic, group).expired.Inc()
	}
}

// DeadLettered implements [event.Observer].
func (m *Bus) DeadLettered(topic, group string) {
	if m.on {
		m.group(topic, group).deadLettered.Inc()
	}
}

func (m *Bus) handled(topic, group string, took time.Duration, err error) {
	s := m.group(topic, group)
	s.handlerTime.Observe(took.Seconds())
	if err != nil {
		s.handlerErrors.Inc()
	}
}

// Committed implements [event.Observer]; the committed cursors are read at
// scrape time instead (see [Bus.Watch]).
func (m *Bus) Committed(string, string, int, uint64) {}

// Skipped implements [event.Observer].
func (m *Bus) Skipped(topic, group string, n uint64) {
	if m.on {
		m.group(topic, group).skipped.Add(float64(n))
	}
}

// GroupExpired implements [event.Observer].
func (m *Bus) GroupExpired(topic, group string) {
	if m.on {
		m.groupsExpired.WithLabelValues(m.topics.value(topic)).Inc()
	}
}

// Watch registers the gauges that are read from bus at scrape time, for
// every group with subscribers in it: lag in events and in seconds, the
// committed cursor and the topic's head (all from the store, as
// [event.Bus.GroupStatus] reads them), deliveries in flight, waiting and buffered,
// subscribers and owned partitions (from [event.Bus.Stats]). Call it once.
func (m *Bus) Watch(bus *event.Bus) error {
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

// busCollector reads a Bus's state at scrape time.
type busCollector struct {
	m   *Bus
	bus *event.Bus

	lag, lagSeconds, committed, head            *prometheus.Desc
	inflight, waiting, buffered, subs, partsOwn *prometheus.Desc
}

func newBusCollector(m *Bus, bus *event.Bus) *busCollector {
	tg := []string{"topic", "group"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	return &busCollector{
		m: m, bus: bus,
		lag:        d("consumer_lag", "Records of the topic above the group's committed cursor (head - committed).", tg...),
		lagSeconds: d("consumer_lag_seconds", "Age of the oldest record the group has not settled; 0 when it is caught up.", tg...),
		committed:  d("consumer_committed_seq", "The group's committed cursor: every record at or below it is settled.", tg...),
		head:       d("topic_head_seq", "The highest seq of the topic.", "topic"),
		inflight:   d("events_in_flight", "Deliveries leased and not settled, in this process.", tg...),
		waiting:    d("events_waiting", "Records waiting for redelivery or dead-lettering, in this process.", tg...),
		buffered:   d("events_buffered", "Records read from the store and not delivered yet, in this process.", tg...),
		subs:       d("consumer_subscribers", "Subscriptions of the group in this process.", tg...),
		partsOwn:   d("consumer_partitions_owned", "Partitions of the topic this process owns for the group.", tg...),
	}
}

// Describe implements prometheus.Collector.
func (c *busCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lag, c.lagSeconds, c.committed, c.head, c.inflight, c.waiting, c.buffered, c.subs, c.partsOwn} {
		ch <- d
	}
}

// groupSums adds up the groups that share labels (beyond the bounds).
type groupSums struct {
	lag, lagSeconds                          float64
	committed                                uint64
	inflight, waiting, buffered, subs, owned float64
	lagKnown                                 bool
}

// Collect implements prometheus.Collector.
func (c *busCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.m.cfg.ScrapeTimeout)
	defer cancel()
	sums := make(map[pair]*groupSums)
	var order []pair
	heads := make(map[string]uint64)
	for _, st := range c.bus.Stats() {
		// Start the counters of a group at 0 once it subscribes, so that
		// rate() sees its first events.
		c.m.group(st.Topic, st.Group)
		c.m.topic(st.Topic)
		k := c.m.labels(st.Topic, st.Group)
		s := sums[k]
		if s == nil {
			s = &groupSums{}
			sums[k] = s
			order = append(order, k)
		}
		s.inflight += float64(st.InFlight)
		s.waiting += float64(st.Waiting)
		s.buffered += float64(st.Buffered)
		s.subs += float64(st.Subscribers)
		s.owned += float64(len(st.Partitions))
		l, err := c.bus.GroupStatus(ctx, st.Topic, st.Group)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.lag, fmt.Errorf("metrics: lag of group %q on %q: %w", st.Group, st.Topic, err))
			continue
		}
		s.lagKnown = true
		s.lag += float64(l.Lag)
		s.lagSeconds = max(s.lagSeconds, float64(l.LagMs)/1000)
		s.committed = l.Committed
		if k.topic != OtherLabel {
			heads[k.topic] = max(heads[k.topic], l.Head)
		}
	}
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	for _, k := range order {
		s := sums[k]
		gauge(c.inflight, s.inflight, k.topic, k.group)
		gauge(c.waiting, s.waiting, k.topic, k.group)
		gauge(c.buffered, s.buffered, k.topic, k.group)
		gauge(c.subs, s.subs, k.topic, k.group)
		gauge(c.partsOwn, s.owned, k.topic, k.group)
		if !s.lagKnown {
			continue
		}
		gauge(c.lag, s.lag, k.topic, k.group)
		gauge(c.lagSeconds, s.lagSeconds, k.topic, k.group)
		if k.topic != OtherLabel && k.group != OtherLabel {
			gauge(c.committed, float64(s.committed), k.topic, k.group)
		}
	}
	for t, h := range heads {
		gauge(c.head, float64(h), t)
	}
}
