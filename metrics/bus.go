package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/event"
)

// BusObserver holds the metrics of an [event.Bus]. It is the bus's
// [event.Observer] and has a publish and a delivery interceptor: configure
// the bus with [Bus.Instrument], then call [Bus.Watch] with the bus for
// the gauges read at scrape time (the lag of every group of the store,
// deliveries in flight). Made with a nil Registerer it does nothing.
type BusObserver struct {
	on     bool
	cfg    Config
	topics *labelSet
	groups *labelSet

	published     *prometheus.CounterVec
	publishErrors *prometheus.CounterVec
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

var _ event.Observer = (*BusObserver)(nil)

// groupSeries are the series of one (topic, group), resolved once so
// that the hot paths do no label hashing.
type groupSeries struct {
	delivered, redelivered, acked, nacked, expired, deadLettered, skipped, handlerErrors prometheus.Counter
	latency, handlerTime                                                                 prometheus.Observer
}

// NewBusObserver returns the bus metrics, registered with cfg.Registerer.
func NewBusObserver(cfg Config) (*BusObserver, error) {
	cfg, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	m := &BusObserver{on: cfg.Registerer != nil, cfg: cfg, topics: newLabelSet(cfg.MaxTopics), groups: newLabelSet(cfg.MaxGroups)}
	if !m.on {
		return m, nil
	}
	tg := []string{"topic", "group"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	m.published = counter("events_published_total", "Records accepted by a publish, including idempotent repeats of a stored id.", "topic")
	m.publishErrors = counter("publish_errors_total", "Publishes (one call of Publish or Append, one record or a batch) the store did not accept; a publish whose caller gave up (context canceled) is not counted.", "topic")
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
	if err := register(cfg.Registerer, m.published, m.publishErrors, m.delivered, m.redelivered, m.acked, m.nacked, m.expired,
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

func (m *BusObserver) topic(topic string) prometheus.Counter {
	if c, ok := m.byTopic.Load(topic); ok {
		return c.(prometheus.Counter)
	}
	lt := m.topics.value(topic)
	if c, ok := m.byTopic.Load(lt); ok {
		return c.(prometheus.Counter)
	}
	c, loaded := m.byTopic.LoadOrStore(lt, m.published.WithLabelValues(lt))
	if !loaded {
		// The topic's errors start at 0 beside its publishes, so that
		// increase() sees its first error.
		m.publishErrors.WithLabelValues(lt)
	}
	return c.(prometheus.Counter)
}

func (m *BusObserver) labels(topic, group string) pair {
	return pair{m.topics.value(topic), m.groups.value(group)}
}

func (m *BusObserver) group(topic, group string) *groupSeries {
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
func (m *BusObserver) Instrument(cfg event.Config) event.Config {
	cfg.Observer = m
	cfg.PublishInterceptors = append(slices.Clip(cfg.PublishInterceptors), m.PublishInterceptor())
	cfg.DeliveryInterceptors = append(slices.Clip(cfg.DeliveryInterceptors), m.DeliveryInterceptor())
	return cfg
}

// PublishInterceptor counts the records accepted by each publish,
// idempotent repeats of a stored id included, and the publishes that
// failed (promlib_publish_errors_total), but those whose caller gave up.
func (m *BusObserver) PublishInterceptor() event.PublishInterceptor {
	return func(next event.PublishFunc) event.PublishFunc {
		if !m.on {
			return next
		}
		return func(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
			out, err := next(ctx, topic, recs)
			switch {
			case err == nil:
				m.topic(topic).Add(float64(len(out)))
			case !errors.Is(err, context.Canceled):
				// The bus has validated topic before its interceptors run.
				m.publishErrors.WithLabelValues(m.topics.value(topic)).Inc()
			}
			return out, err
		}
	}
}

// DeliveryInterceptor times each handler call and counts those that
// return an error or panic.
func (m *BusObserver) DeliveryInterceptor() event.DeliveryInterceptor {
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
func (m *BusObserver) Delivered(topic, group string, attempt int) {
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
func (m *BusObserver) Acked(topic, group string, age time.Duration) {
	if !m.on {
		return
	}
	s := m.group(topic, group)
	s.acked.Inc()
	s.latency.Observe(max(age, 0).Seconds())
}

// Nacked implements [event.Observer].
func (m *BusObserver) Nacked(topic, group string) {
	if m.on {
		m.group(topic, group).nacked.Inc()
	}
}

// Expired implements [event.Observer].
func (m *BusObserver) Expired(topic, group string) {
	if m.on {
		m.group(topic, group).expired.Inc()
	}
}

// DeadLettered implements [event.Observer].
func (m *BusObserver) DeadLettered(topic, group string) {
	if m.on {
		m.group(topic, group).deadLettered.Inc()
	}
}

func (m *BusObserver) handled(topic, group string, took time.Duration, err error) {
	s := m.group(topic, group)
	s.handlerTime.Observe(took.Seconds())
	if err != nil {
		s.handlerErrors.Inc()
	}
}

// Committed implements [event.Observer]; the committed cursors are read at
// scrape time instead (see [Bus.Watch]).
func (m *BusObserver) Committed(string, string, int, uint64) {}

// Skipped implements [event.Observer].
func (m *BusObserver) Skipped(topic, group string, n uint64) {
	if m.on {
		m.group(topic, group).skipped.Add(float64(n))
	}
}

// GroupExpired implements [event.Observer].
func (m *BusObserver) GroupExpired(topic, group string) {
	if m.on {
		m.groupsExpired.WithLabelValues(m.topics.value(topic)).Inc()
	}
}
