package metrics

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/ws"
)

// GatewayObserver holds the metrics of a [ws.Gateway]. It is the gateway's
// [ws.Observer]: pass it as ws.Config.Observer, then call [Gateway.Watch]
// with the gateway's Stats for the gauges read at scrape time (send
// queues, leases). Made with a nil Registerer it does nothing.
type GatewayObserver struct {
	on     bool
	cfg    Config
	topics *labelSet
	groups *labelSet

	opened      prometheus.Counter
	closed      *prometheus.CounterVec
	open        prometheus.Gauge
	lasted      prometheus.Histogram
	frames      *prometheus.CounterVec
	frameErrors *prometheus.CounterVec
	rateLimited *prometheus.CounterVec
	frameTime   *prometheus.HistogramVec
	sent        *prometheus.CounterVec
	liveSubs    *prometheus.GaugeVec
	liveDropped *prometheus.CounterVec
	liveRead    prometheus.Counter

	ops    map[string]*opSeries // by op label, fixed at construction
	errs   sync.Map             // pair{op, code} -> prometheus.Counter
	bySent sync.Map             // pair of labels -> prometheus.Counter
	byLive sync.Map             // topic -> prometheus.Gauge

	watched atomic.Bool
}

var _ ws.Observer = (*GatewayObserver)(nil)

type opSeries struct {
	frames      prometheus.Counter
	rateLimited prometheus.Counter
	took        prometheus.Observer
}

// Op label values besides the protocol's ops: a frame that could not be
// decoded, and an op the protocol does not have.
const (
	opInvalid = "invalid"
	opOther   = "other"
)

// gatewayOps are the op label values: what a client may send, and the
// HTTP publish.
var gatewayOps = []string{
	wsproto.OpAuth, wsproto.OpPublish, wsproto.OpSubscribe, wsproto.OpUnsubscribe, wsproto.OpAck, wsproto.OpNack,
	wsproto.OpModAck, wsproto.OpPause, wsproto.OpResume, "HTTP_PUBLISH", opInvalid, opOther,
}

// NewGatewayObserver returns the gateway metrics, registered with cfg.Registerer.
func NewGatewayObserver(cfg Config) (*GatewayObserver, error) {
	cfg, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	m := &GatewayObserver{on: cfg.Registerer != nil, cfg: cfg, topics: newLabelSet(cfg.MaxTopics), groups: newLabelSet(cfg.MaxGroups)}
	if !m.on {
		return m, nil
	}
	m.opened = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "ws_connections_opened_total", Help: "WebSocket connections accepted.",
	})
	m.closed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "ws_connections_closed_total",
		Help: "WebSocket connections ended, by close code (1006: dropped without a close handshake).",
	}, []string{"code"})
	m.open = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "ws_connections", Help: "WebSocket connections open now.",
	})
	m.lasted = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "ws_connection_duration_seconds", Help: "How long WebSocket connections lasted.",
		Buckets: cfg.ConnectionBuckets,
	})
	m.frames = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "ws_frames_received_total",
		Help: "Client frames handled, by op (HTTP_PUBLISH for HTTP publishes, invalid for undecodable frames).",
	}, []string{"op"})
	m.frameErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "ws_frame_errors_total", Help: "Client frames answered with ERR, by op and error code.",
	}, []string{"op", "code"})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "ws_rate_limited_total", Help: "Client frames refused by a rate or count limit, by op.",
	}, []string{"op"})
	m.frameTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "ws_frame_duration_seconds", Help: "Time to handle a client frame, by op.",
		Buckets: cfg.DurationBuckets,
	}, []string{"op"})
	m.sent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "ws_events_sent_total", Help: "EVENT frames written to clients.",
	}, []string{"topic", "group"})
	m.liveSubs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "ws_live_subscribers", Help: "Live subscriptions (SUBSCRIBE without group) held now, by topic.",
	}, []string{"topic"})
	m.liveDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "ws_live_slow_total",
		Help: "Live subscribers that fell behind their connection's live queue, by policy: close (the connection was closed with 4429) or skip (queued events dropped for a GAP).",
	}, []string{"reason"})
	m.liveRead = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "ws_live_recovered_records_total", Help: "Records read from the store for live SUBSCRIBEs with since.",
	})
	if err := register(cfg.Registerer, m.opened, m.closed, m.open, m.lasted, m.frames, m.frameErrors,
		m.rateLimited, m.frameTime, m.sent, m.liveSubs, m.liveDropped, m.liveRead); err != nil {
		return nil, err
	}
	m.ops = make(map[string]*opSeries, len(gatewayOps))
	for _, op := range gatewayOps {
		m.ops[op] = &opSeries{
			frames:      m.frames.WithLabelValues(op),
			rateLimited: m.rateLimited.WithLabelValues(op),
			took:        m.frameTime.WithLabelValues(op),
		}
	}
	return m, nil
}

func (m *GatewayObserver) op(op string) (string, *opSeries) {
	if op == "" {
		op = opInvalid
	}
	s, ok := m.ops[op]
	if !ok {
		op = opOther
		s = m.ops[op]
	}
	return op, s
}

// closeCodeLabel bounds the close code label: the codes of RFC 6455 and
// of the gateway, and "other" for the rest (a peer may close with any
// code from 3000 to 4999).
func closeCodeLabel(code int) string {
	switch code {
	case 1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1015,
		wsproto.CloseTokenExpired, wsproto.CloseAuthTimeout, wsproto.ClosePingTimeout, wsproto.CloseSlowSubscriber:
		return strconv.Itoa(code)
	}
	return "other"
}

// codeLabel bounds the error code label. Codes come from the gateway, not
// from clients; anything that does not look like one is "other".
func codeLabel(c wsproto.Code) string {
	if len(c) == 0 || len(c) > 32 {
		return "other"
	}
	for i := 0; i < len(c); i++ {
		if b := c[i]; (b < 'a' || b > 'z') && b != '_' {
			return "other"
		}
	}
	return string(c)
}

// Connected implements [ws.Observer].
func (m *GatewayObserver) Connected() {
	if m.on {
		m.opened.Inc()
		m.open.Inc()
	}
}

// Disconnected implements [ws.Observer].
func (m *GatewayObserver) Disconnected(code int, lasted time.Duration) {
	if !m.on {
		return
	}
	m.open.Dec()
	m.closed.WithLabelValues(closeCodeLabel(code)).Inc()
	m.lasted.Observe(lasted.Seconds())
}

// Handled implements [ws.Observer].
func (m *GatewayObserver) Handled(op string, code wsproto.Code, took time.Duration) {
	if !m.on {
		return
	}
	label, s := m.op(op)
	s.frames.Inc()
	s.took.Observe(took.Seconds())
	if code == "" {
		return
	}
	if code == wsproto.CodeRateLimited {
		s.rateLimited.Inc()
	}
	k := pair{label, codeLabel(code)}
	c, ok := m.errs.Load(k)
	if !ok {
		c, _ = m.errs.LoadOrStore(k, m.frameErrors.WithLabelValues(k.topic, k.group))
	}
	c.(prometheus.Counter).Inc()
}

// Sent implements [ws.Observer].
func (m *GatewayObserver) Sent(topic, group string) {
	if !m.on {
		return
	}
	c, ok := m.bySent.Load(pair{topic, group})
	if !ok {
		k := pair{m.topics.value(topic), m.groups.value(group)}
		if c, ok = m.bySent.Load(k); !ok {
			c, _ = m.bySent.LoadOrStore(k, m.sent.WithLabelValues(k.topic, k.group))
		}
	}
	c.(prometheus.Counter).Inc()
}

// LiveSubscribers implements [ws.Observer].
func (m *GatewayObserver) LiveSubscribers(topic string, delta int) {
	if !m.on {
		return
	}
	g, ok := m.byLive.Load(topic)
	if !ok {
		label := m.topics.value(topic)
		if g, ok = m.byLive.Load(label); !ok {
			g, _ = m.byLive.LoadOrStore(label, m.liveSubs.WithLabelValues(label))
		}
	}
	g.(prometheus.Gauge).Add(float64(delta))
}

// LiveDropped implements [ws.Observer].
func (m *GatewayObserver) LiveDropped(_, policy string) {
	if !m.on {
		return
	}
	switch policy {
	case wsproto.SlowClose, wsproto.SlowSkip:
	default:
		policy = "other"
	}
	m.liveDropped.WithLabelValues(policy).Inc()
}

// LiveRecovered implements [ws.Observer].
func (m *GatewayObserver) LiveRecovered(_ string, records int) {
	if m.on {
		m.liveRead.Add(float64(records))
	}
}

// Watch registers the gauges read from stats at scrape time: connections
// authenticated, subscriptions, frames waiting in send queues (all of
// them and the fullest queue) and deliveries leased to clients. Pass the
// gateway's Stats method. Call it once.
func (m *GatewayObserver) Watch(stats func() ws.Stats) error {
	if !m.on {
		return nil
	}
	if stats == nil {
		return invalid("stats", "nil")
	}
	if !m.watched.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: gateway: Watch was already called", ErrInvalid)
	}
	if err := register(m.cfg.Registerer, newGatewayCollector(stats)); err != nil {
		m.watched.Store(false)
		return err
	}
	return nil
}

type gatewayCollector struct {
	stats                                     func() ws.Stats
	authed, subs, queued, maxQueued, inflight *prometheus.Desc
}

func newGatewayCollector(stats func() ws.Stats) *gatewayCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, nil, nil)
	}
	return &gatewayCollector{
		stats:     stats,
		authed:    d("ws_connections_authenticated", "WebSocket connections open now that have authenticated."),
		subs:      d("ws_subscriptions", "Subscriptions held by WebSocket connections."),
		queued:    d("ws_send_queue_frames", "Frames waiting in the send queues of all connections."),
		maxQueued: d("ws_send_queue_max_frames", "Frames waiting in the fullest send queue of one connection."),
		inflight:  d("ws_events_in_flight", "Deliveries sent or queued to clients and not settled."),
	}
}

// Describe implements prometheus.Collector.
func (c *gatewayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.authed, c.subs, c.queued, c.maxQueued, c.inflight} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *gatewayCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for _, v := range []struct {
		d *prometheus.Desc
		n int
	}{{c.authed, st.Authenticated}, {c.subs, st.Subscriptions}, {c.queued, st.Queued}, {c.maxQueued, st.MaxQueued}, {c.inflight, st.Leases}} {
		ch <- prometheus.MustNewConstMetric(v.d, prometheus.GaugeValue, float64(v.n))
	}
}
