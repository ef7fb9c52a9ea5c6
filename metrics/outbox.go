package metrics

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/outbox"
)

// OutboxObserver holds the metrics of an outbox [outbox.Drainer]. It is the
// drainer's [outbox.Observer]: pass it as outbox.Config.Observer, then call
// [Outbox.Watch] with the outbox store for the row counts read at scrape
// time. Made with a nil Registerer it does nothing.
type OutboxObserver struct {
	on     bool
	cfg    Config
	topics *labelSet

	sent    *prometheus.CounterVec
	retried *prometheus.CounterVec
	failed  *prometheus.CounterVec
	latency *prometheus.HistogramVec

	byTopic sync.Map // topic label -> *outboxSeries

	watched atomic.Bool
}

var _ outbox.Observer = (*OutboxObserver)(nil)

type outboxSeries struct {
	sent, retried, failed prometheus.Counter
	latency               prometheus.Observer
}

// NewOutboxObserver returns the outbox metrics, registered with cfg.Registerer.
func NewOutboxObserver(cfg Config) (*OutboxObserver, error) {
	cfg, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	m := &OutboxObserver{on: cfg.Registerer != nil, cfg: cfg, topics: newLabelSet(cfg.MaxTopics)}
	if !m.on {
		return m, nil
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, []string{"topic"})
	}
	m.sent = counter("outbox_sent_total", "Outbox rows published and marked sent.")
	m.retried = counter("outbox_retries_total", "Failed publish attempts of outbox rows that will be retried.")
	m.failed = counter("outbox_failed_total", "Outbox rows that failed for good.")
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "outbox_drain_latency_seconds",
		Help:    "Time from adding an outbox row to its publish.",
		Buckets: cfg.LatencyBuckets,
	}, []string{"topic"})
	if err := register(cfg.Registerer, m.sent, m.retried, m.failed, m.latency); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *OutboxObserver) series(topic string) *outboxSeries {
	if s, ok := m.byTopic.Load(topic); ok {
		return s.(*outboxSeries)
	}
	lt := m.topics.value(topic)
	if s, ok := m.byTopic.Load(lt); ok {
		return s.(*outboxSeries)
	}
	s, _ := m.byTopic.LoadOrStore(lt, &outboxSeries{
		sent:    m.sent.WithLabelValues(lt),
		retried: m.retried.WithLabelValues(lt),
		failed:  m.failed.WithLabelValues(lt),
		latency: m.latency.WithLabelValues(lt),
	})
	return s.(*outboxSeries)
}

// Sent implements [outbox.Observer].
func (m *OutboxObserver) Sent(topic string, age time.Duration) {
	if !m.on {
		return
	}
	s := m.series(topic)
	s.sent.Inc()
	s.latency.Observe(max(age, 0).Seconds())
}

// Retried implements [outbox.Observer].
func (m *OutboxObserver) Retried(topic string) {
	if m.on {
		m.series(topic).retried.Inc()
	}
}

// Failed implements [outbox.Observer].
func (m *OutboxObserver) Failed(topic string) {
	if m.on {
		m.series(topic).failed.Inc()
	}
}

// StatsReader is what [Outbox.Watch] needs of an outbox store; every
// [outbox.Store] is one.
type StatsReader interface {
	Stats(ctx context.Context) (outbox.Stats, error)
}

// Watch registers the gauge promlib_outbox_rows{status}, the rows of
// store by status (pending, sent, failed), read at scrape time. Call it
// once.
func (m *OutboxObserver) Watch(store StatsReader) error {
	if !m.on {
		return nil
	}
	if store == nil {
		return invalid("store", "nil")
	}
	if !m.watched.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: outbox: Watch was already called", ErrInvalid)
	}
	c := &outboxCollector{store: store, timeout: m.cfg.ScrapeTimeout, rows: prometheus.NewDesc(
		prometheus.BuildFQName(Namespace, "", "outbox_rows"), "Outbox rows by status.", []string{"status"}, nil)}
	if err := register(m.cfg.Registerer, c); err != nil {
		m.watched.Store(false)
		return err
	}
	return nil
}

type outboxCollector struct {
	store   StatsReader
	timeout time.Duration
	rows    *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.rows }

// Collect implements prometheus.Collector.
func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st, err := c.store.Stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.rows, fmt.Errorf("metrics: outbox stats: %w", err))
		return
	}
	for _, v := range []struct {
		status outbox.Status
		n      int64
	}{{outbox.StatusPending, st.Pending}, {outbox.StatusSent, st.Sent}, {outbox.StatusFailed, st.Failed}} {
		ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(v.n), string(v.status))
	}
}
