package deploy_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/metrics"
	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/ws"
)

// hubRegistrations are the calls by which the hub (examples/hub) puts
// collectors on its registry: hubMetricNames makes the same ones.
var hubRegistrations = []string{
	"collectors.NewGoCollector", "collectors.NewProcessCollector",
	"metrics.NewBusObserver", "metrics.NewGatewayObserver", "metrics.NewOutboxObserver",
	"metrics.Config{Registerer:", "ops.Config{Registerer:",
}

// The hub registers the collectors hubMetricNames registers, no other: a
// collector added to the hub must be added there too, or the names its
// alerts and dashboard may use would be out of date.
func TestHubRegistrations(t *testing.T) {
	t.Parallel()
	src := hubSource(t)
	// Constructors of collectors, and the configs that get the registry.
	re := regexp.MustCompile(`\b(collectors\.New\w+|metrics\.New\w+|\w+\.Config\{[^{}]*?\bRegisterer:)`)
	var got []string
	for _, m := range re.FindAllString(src, -1) {
		if i := strings.Index(m, "{"); i >= 0 {
			m = m[:i] + "{Registerer:" // the config's type and the field
		}
		got = append(got, m)
	}
	slices.Sort(got)
	got = slices.Compact(got)
	want := slices.Clone(hubRegistrations)
	slices.Sort(want)
	require.Equal(t, want, got, "the hub's registrations changed: make hubMetricNames register what the hub does")
}

// recorder remembers the collectors registered through it.
type recorder struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.mu.Lock()
	r.collectors = append(r.collectors, c)
	r.mu.Unlock()
	return r.Registry.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)

// described returns the names of the metrics the recorded collectors
// describe.
func (r *recorder) described(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	ch := make(chan *prometheus.Desc)
	go func() {
		defer close(ch)
		for _, c := range cs {
			c.Describe(ch)
		}
	}()
	var names []string
	for d := range ch {
		m := fqNameRE.FindStringSubmatch(d.String())
		require.NotNil(t, m, "no name in %s", d)
		names = append(names, m[1])
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// hubMetricNames returns the series names the hub exports at /metrics:
// it registers on a registry of its own the collectors the hub registers
// (newObservability and mountProduct of examples/hub), makes every series
// of them exist (a bus with a subscribed group over a store, a gateway,
// an outbox, one of each counted event, one ops action), and gathers.
// Histograms give their _bucket, _sum and _count series, summaries their
// own name, _sum and _count.
func hubMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	ctx := context.Background()
	reg := &recorder{Registry: prometheus.NewRegistry()}
	require.NoError(t, reg.Register(collectors.NewGoCollector()))
	require.NoError(t, reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})))
	// The store is read at every gather, so that a group appears at once.
	cfg := metrics.Config{Registerer: reg, GroupsInterval: time.Nanosecond}
	bm, err := metrics.NewBusObserver(cfg)
	require.NoError(t, err)
	gm, err := metrics.NewGatewayObserver(cfg)
	require.NoError(t, err)
	om, err := metrics.NewOutboxObserver(cfg)
	require.NoError(t, err)

	bus, err := event.NewBus(event.NewMemoryStore(), bm.Instrument(event.Config{}))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, bus.Close(ctx))
	})
	require.NoError(t, bm.Watch(bus))
	gw, err := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.OpenAccess(), Observer: gm})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, gw.Shutdown(ctx))
	})
	require.NoError(t, gm.Watch(gw.Stats))
	require.NoError(t, om.Watch(outbox.NewMemoryStore()))
	oh, err := ops.NewHandler(ops.Config{Bus: bus, Registerer: reg})
	require.NoError(t, err)

	// A group with a subscriber in this process, over a topic with a
	// record: the store's and this process's group series.
	_, err = bus.Subscribe(ctx, "orders", "billing", func(context.Context, *event.Delivery) error { return nil })
	require.NoError(t, err)
	_, err = bus.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)
	// One of each event the observers count.
	_, err = bm.PublishInterceptor()(func(context.Context, string, []event.Record) ([]event.Record, error) {
		return nil, errors.New("store down")
	})(ctx, "orders", []event.Record{{Payload: []byte(`2`)}})
	require.Error(t, err)
	bm.Delivered("orders", "billing", 2)
	bm.Acked("orders", "billing", time.Second)
	bm.Nacked("orders", "billing")
	bm.Expired("orders", "billing")
	bm.DeadLettered("orders", "billing")
	bm.Skipped("orders", "billing", 1)
	bm.GroupExpired("orders", "gone")
	require.Error(t, bm.DeliveryInterceptor()(func(context.Context, *event.Delivery) error {
		return errors.New("cannot bill")
	})(ctx, &event.Delivery{Record: event.Record{Topic: "orders"}, Group: "billing"}))
	gm.Connected()
	gm.Connected()
	gm.Disconnected(1000, time.Minute)
	gm.Handled(wsproto.OpAuth, wsproto.CodeAuthFailed, time.Millisecond)
	gm.Sent("orders", "billing")
	gm.LiveSubscribers("orders", 1)
	gm.LiveDropped("orders", wsproto.SlowSkip)
	gm.LiveRecovered("orders", 1)
	om.Sent("orders", time.Second)
	om.Retried("orders")
	om.Failed("orders")
	w := httptest.NewRecorder()
	oh.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/ops/groups/delete?topic=orders&group=gone", nil))
	require.NotEqual(t, http.StatusNotFound, w.Code, w.Body.String())

	want := reg.described(t)
	var fams []*dto.MetricFamily
	var missing []string
	// The subscription's group reaches the store as the subscription
	// starts: gather until every described metric has a series.
	require.Eventually(t, func() bool {
		fams, err = reg.Gather()
		require.NoError(t, err)
		have := map[string]bool{}
		for _, f := range fams {
			have[f.GetName()] = true
		}
		missing = missing[:0]
		for _, n := range want {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0
	}, 10*time.Second, 10*time.Millisecond,
		"metrics the hub registers that never got a series (make hubMetricNames exercise them): %v", &missing)

	names := map[string]bool{}
	for _, f := range fams {
		n := f.GetName()
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[n], names[n+"_sum"], names[n+"_count"] = true, true, true
		default:
			names[n] = true
		}
	}
	return names
}
