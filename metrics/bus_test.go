package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/metrics"
)

func newBus(t *testing.T, bm *metrics.BusObserver) *event.Bus {
	t.Helper()
	cfg := event.Config{CommitInterval: 10 * time.Millisecond}
	if bm != nil {
		cfg = bm.Instrument(cfg)
	}
	bus, err := event.NewBus(event.NewMemoryStore(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, bus.Close(ctx))
	})
	return bus
}

// Counters move as events are published, acked, nacked and dead-lettered;
// lag and in-flight are read at scrape time.
func TestBusMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	// The store's groups are read at every scrape of scrapeUntil.
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: reg, GroupsInterval: time.Millisecond})
	require.NoError(t, err)
	bus := newBus(t, bm)
	require.NoError(t, bm.Watch(bus))
	ctx := context.Background()

	_, err = bus.Subscribe(ctx, "orders", "billing", func(ctx context.Context, d *event.Delivery) error {
		if string(d.Payload) == `"bad"` {
			return errors.New("cannot bill")
		}
		return nil
	}, event.WithMaxAttempts(2), event.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	audit, err := bus.Subscribe(ctx, "orders", "audit", func(ctx context.Context, d *event.Delivery) error { return nil })
	require.NoError(t, err)
	audit.Pause()

	for _, p := range []string{`1`, `2`, `"bad"`, `3`, `4`, `5`} {
		_, err := bus.Publish(ctx, "orders", []byte(p), event.WithKey("k"))
		require.NoError(t, err)
	}

	fams := scrapeUntil(t, reg, func(f famMap) bool {
		acked, _ := value(f, "promlib_events_acked_total", "topic", "orders", "group", "billing")
		dl, _ := value(f, "promlib_events_dead_lettered_total", "topic", "orders", "group", "billing")
		lag, _ := value(f, "promlib_consumer_lag", "topic", "orders", "group", "billing")
		_, started := value(f, "promlib_events_delivered_total", "topic", "orders", "group", "audit")
		return acked == 5 && dl == 1 && lag == 0 && started
	})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"promlib_events_published_total", []string{"topic", "orders"}, 6},
		{"promlib_events_published_total", []string{"topic", "orders.dlq"}, 1},
		{"promlib_events_delivered_total", []string{"topic", "orders", "group", "billing"}, 7},
		{"promlib_events_redelivered_total", []string{"topic", "orders", "group", "billing"}, 1},
		{"promlib_events_acked_total", []string{"topic", "orders", "group", "billing"}, 5},
		{"promlib_events_nacked_total", []string{"topic", "orders", "group", "billing"}, 2},
		{"promlib_events_dead_lettered_total", []string{"topic", "orders", "group", "billing"}, 1},
		{"promlib_events_expired_total", []string{"topic", "orders", "group", "billing"}, 0},
		{"promlib_handler_errors_total", []string{"topic", "orders", "group", "billing"}, 2},
		{"promlib_handler_duration_seconds", []string{"topic", "orders", "group", "billing"}, 7},
		{"promlib_delivery_latency_seconds", []string{"topic", "orders", "group", "billing"}, 5},
		{"promlib_topic_head_seq", []string{"topic", "orders"}, 6},
		{"promlib_consumer_committed_seq", []string{"topic", "orders", "group", "billing"}, 6},
		{"promlib_consumer_lag", []string{"topic", "orders", "group", "billing"}, 0},
		{"promlib_consumer_lag_seconds", []string{"topic", "orders", "group", "billing"}, 0},
		{"promlib_events_in_flight", []string{"topic", "orders", "group", "billing"}, 0},
		{"promlib_consumer_subscribers", []string{"topic", "orders", "group", "billing"}, 1},
		{"promlib_consumer_partitions_owned", []string{"topic", "orders", "group", "billing"}, 1},
		// The paused group has read nothing.
		{"promlib_consumer_lag", []string{"topic", "orders", "group", "audit"}, 6},
		{"promlib_consumer_committed_seq", []string{"topic", "orders", "group", "audit"}, 0},
		{"promlib_events_delivered_total", []string{"topic", "orders", "group", "audit"}, 0},
	} {
		got, ok := value(fams, c.name, c.labels...)
		if assert.True(t, ok, "%s%v missing", c.name, c.labels) {
			assert.Equal(t, c.want, got, "%s%v", c.name, c.labels)
		}
	}
	lagSec, ok := value(fams, "promlib_consumer_lag_seconds", "topic", "orders", "group", "audit")
	require.True(t, ok)
	assert.GreaterOrEqual(t, lagSec, 0.0)

	// Resumed, the paused group catches up; the counters of the first
	// group do not move.
	audit.Resume()
	fams = scrapeUntil(t, reg, func(f famMap) bool {
		lag, _ := value(f, "promlib_consumer_lag", "topic", "orders", "group", "audit")
		return lag == 0
	})
	acked, _ := value(fams, "promlib_events_acked_total", "topic", "orders", "group", "audit")
	assert.Equal(t, 6.0, acked)
	acked, _ = value(fams, "promlib_events_acked_total", "topic", "orders", "group", "billing")
	assert.Equal(t, 5.0, acked)

	text, _ := scrape(t, reg)
	lint(t, reg, text)
}

// Past MaxTopics and MaxGroups, topics and groups share the OtherLabel
// series.
func TestLabelBounds(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: reg, MaxTopics: 2, MaxGroups: 1})
	require.NoError(t, err)
	published := bm.PublishInterceptor()(func(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
		return recs, nil
	})
	for _, topic := range []string{"a", "b", "c", "d", "a"} {
		_, err := published(context.Background(), topic, []event.Record{{Topic: topic}})
		require.NoError(t, err)
		bm.Delivered(topic, "g-"+topic, 1)
	}
	_, fams := scrape(t, reg)
	assert.Equal(t, []string{"a", "b", metrics.OtherLabel}, labelValues(fams, "promlib_events_published_total", "topic"))
	v, _ := value(fams, "promlib_events_published_total", "topic", metrics.OtherLabel)
	assert.Equal(t, 2.0, v)
	v, _ = value(fams, "promlib_events_published_total", "topic", "a")
	assert.Equal(t, 2.0, v)
	assert.Equal(t, []string{"g-a", metrics.OtherLabel, metrics.OtherLabel},
		labelValues(fams, "promlib_events_delivered_total", "group"))
	v, _ = value(fams, "promlib_events_delivered_total", "topic", metrics.OtherLabel, "group", metrics.OtherLabel)
	assert.Equal(t, 2.0, v)
	require.Error(t, event.ValidateTopic(metrics.OtherLabel), "OtherLabel must not be a valid topic")
}

// A nil Registerer means no metrics: the observer does nothing.
func TestNoRegisterer(t *testing.T) {
	t.Parallel()
	bm, err := metrics.NewBusObserver(metrics.Config{})
	require.NoError(t, err)
	bus := newBus(t, bm)
	require.NoError(t, bm.Watch(bus))
	_, err = bus.Publish(context.Background(), "a", []byte(`1`))
	require.NoError(t, err)
	bm.Delivered("a", "g", 2)
	bm.Acked("a", "g", time.Second)
	handle := bm.DeliveryInterceptor()(func(context.Context, *event.Delivery) error { return errors.New("x") })
	assert.Error(t, handle(context.Background(), &event.Delivery{Record: event.Record{Topic: "a"}, Group: "g"}))
	bm.Skipped("a", "g", 3)

	gm, err := metrics.NewGatewayObserver(metrics.Config{})
	require.NoError(t, err)
	gm.Connected()
	gm.Handled("PUBLISH", "bad_frame", time.Millisecond)
	gm.Sent("a", "g")
	gm.Disconnected(1000, time.Second)
	om, err := metrics.NewOutboxObserver(metrics.Config{})
	require.NoError(t, err)
	om.Sent("a", time.Second)

	w := httptest.NewRecorder()
	metrics.Handler(nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusNotFound, w.Code)
}

func TestRegisterTwice(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	_, err = metrics.NewBusObserver(metrics.Config{Registerer: reg})
	assert.Error(t, err, "the same names twice in one registry")
	// A failed registration leaves nothing behind: another registry works.
	_, err = metrics.NewBusObserver(metrics.Config{Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)

	bus := newBus(t, bm)
	require.NoError(t, bm.Watch(bus))
	assert.ErrorIs(t, bm.Watch(bus), metrics.ErrInvalid)
	assert.ErrorIs(t, bm.Watch(nil), metrics.ErrInvalid)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		cfg   metrics.Config
		field string
	}{
		{"negative topics", metrics.Config{MaxTopics: -1}, "MaxTopics"},
		{"negative groups", metrics.Config{MaxGroups: -1}, "MaxGroups"},
		{"empty buckets", metrics.Config{LatencyBuckets: []float64{}}, "LatencyBuckets"},
		{"unsorted buckets", metrics.Config{DurationBuckets: []float64{1, 0.5}}, "DurationBuckets"},
		{"repeated buckets", metrics.Config{ConnectionBuckets: []float64{1, 1}}, "ConnectionBuckets"},
		{"negative timeout", metrics.Config{ScrapeTimeout: -time.Second}, "ScrapeTimeout"},
		{"negative groups interval", metrics.Config{GroupsInterval: -time.Second}, "GroupsInterval"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := metrics.NewBusObserver(tt.cfg)
			require.ErrorIs(t, err, metrics.ErrInvalid)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
}

// headFailStore fails Head on demand.
type headFailStore struct {
	*event.MemoryStore
	fail atomic.Bool
}

func (s *headFailStore) Head(ctx context.Context, topic string) (uint64, error) {
	if s.fail.Load() {
		return 0, errors.New("store down")
	}
	return s.MemoryStore.Head(ctx, topic)
}

// A group whose lag cannot be read is left out (and the failed read
// counted); the rest is served.
func TestScrapeWithStoreError(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	store := &headFailStore{MemoryStore: event.NewMemoryStore()}
	bus, err := event.NewBus(store, bm.Instrument(event.Config{}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	require.NoError(t, bm.Watch(bus))
	ctx := context.Background()
	_, err = bus.Subscribe(ctx, "orders", "billing", func(context.Context, *event.Delivery) error { return nil })
	require.NoError(t, err)
	_, err = bus.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)

	store.fail.Store(true)
	_, fams := scrape(t, reg)
	_, ok := value(fams, "promlib_consumer_lag", "topic", "orders", "group", "billing")
	assert.False(t, ok)
	v, ok := value(fams, "promlib_events_published_total", "topic", "orders")
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)
	_, ok = value(fams, "promlib_consumer_subscribers", "topic", "orders", "group", "billing")
	assert.True(t, ok, "the in-process gauges are still served")
	v, _ = value(fams, "promlib_consumer_collect_errors_total")
	assert.Equal(t, 1.0, v)
}

// appendFailStore refuses appends to a topic with an error of its own.
type appendFailStore struct {
	*event.MemoryStore
	fail map[string]error // topic -> the error of its appends
}

func (s *appendFailStore) Append(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
	if err := s.fail[topic]; err != nil {
		return nil, err
	}
	return s.MemoryStore.Append(ctx, topic, recs)
}

// A publish the store refuses counts in promlib_publish_errors_total of
// its topic, whose series starts at 0 with the topic's first publish; a
// publish whose caller gave up is no error of the store and is not
// counted.
func TestPublishErrors(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	store := &appendFailStore{MemoryStore: event.NewMemoryStore(), fail: map[string]error{
		"down": errors.New("store down"),
		"gone": fmt.Errorf("append: %w", context.Canceled),
	}}
	bus, err := event.NewBus(store, bm.Instrument(event.Config{}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	ctx := context.Background()

	_, err = bus.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)
	_, fams := scrape(t, reg)
	v, ok := value(fams, "promlib_publish_errors_total", "topic", "orders")
	assert.True(t, ok, "the error series of a topic exists from its first publish")
	assert.Equal(t, 0.0, v)

	for range 2 {
		_, err = bus.Publish(ctx, "down", []byte(`1`))
		require.ErrorContains(t, err, "store down")
	}
	_, err = bus.Append(ctx, "down", []event.Record{{Payload: []byte(`1`)}, {Payload: []byte(`2`)}})
	require.ErrorContains(t, err, "store down")
	_, err = bus.Publish(ctx, "gone", []byte(`1`))
	require.ErrorIs(t, err, context.Canceled)
	// Refused before the store by the bus: bad input, no publish.
	_, err = bus.Publish(ctx, "orders", []byte(`not json`))
	require.ErrorIs(t, err, event.ErrInvalid)

	_, fams = scrape(t, reg)
	v, _ = value(fams, "promlib_publish_errors_total", "topic", "down")
	assert.Equal(t, 3.0, v, "two publishes and one batch")
	_, ok = value(fams, "promlib_publish_errors_total", "topic", "gone")
	assert.False(t, ok, "a canceled publish is not counted")
	v, _ = value(fams, "promlib_publish_errors_total", "topic", "orders")
	assert.Equal(t, 0.0, v)
	v, _ = value(fams, "promlib_events_published_total", "topic", "orders")
	assert.Equal(t, 1.0, v)
}
