package metrics_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/metrics"
)

var t0 = time.Unix(1_700_000_000, 0)

// gather returns what reg gathers, by name.
func gather(t *testing.T, reg *prometheus.Registry) famMap {
	t.Helper()
	fs, err := reg.Gather()
	require.NoError(t, err)
	out := make(famMap, len(fs))
	for _, f := range fs {
		out[f.GetName()] = f
	}
	return out
}

// series are the gauges of one group from the store.
type series struct {
	lag, lagSeconds, committed, members, deadLetters, head float64
}

// groupSeries returns the store's gauges of group on topic, failing the
// test if one is missing.
func groupSeries(t *testing.T, f famMap, topic, group string) series {
	t.Helper()
	get := func(name string, labels ...string) float64 {
		v, ok := value(f, name, labels...)
		require.True(t, ok, "%s%v missing", name, labels)
		return v
	}
	tg := []string{"topic", topic, "group", group}
	return series{
		lag:         get("promlib_consumer_lag", tg...),
		lagSeconds:  get("promlib_consumer_lag_seconds", tg...),
		committed:   get("promlib_consumer_committed_seq", tg...),
		members:     get("promlib_consumer_members", tg...),
		deadLetters: get("promlib_consumer_dead_letters_pending", tg...),
		head:        get("promlib_topic_head_seq", "topic", topic),
	}
}

// busObserver signals acks and dead letters.
type busObserver struct {
	event.NopObserver
	acked, deadLettered chan struct{}
}

func (o *busObserver) Acked(string, string, time.Duration) { o.acked <- struct{}{} }
func (o *busObserver) DeadLettered(string, string)         { o.deadLettered <- struct{}{} }

func receive(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s", what)
	}
}

// The lag metric of a group with no subscriber in the process: a group
// consumed by another process's Bus (a second Bus on the same store),
// which then stops while publishes continue. The metrics of the first
// process, which never subscribes, report the group's members falling to
// 0, its committed cursor, its lag in records and in seconds growing and
// its pending dead letters: what an alert on a dead consumer reads. The
// store is read once per GroupsInterval, by a fake clock.
func TestLagOfAGroupWithoutSubscriberInTheProcess(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		open func(t *testing.T, clk clock.Clock) event.Store
	}{
		{"memory", func(t *testing.T, clk clock.Clock) event.Store {
			return event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})
		}},
		{"sqlite", func(t *testing.T, clk clock.Clock) event.Store {
			s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"),
				sqlitestore.Config{Clock: clk, Synchronous: "NORMAL"})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
			return s
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(t0)
			testDeadConsumer(t, clk, tt.open(t, clk))
		})
	}
}

func testDeadConsumer(t *testing.T, clk *clock.Fake, store event.Store) {
	ctx := context.Background()
	const interval = 15 * time.Second
	reg := prometheus.NewRegistry()
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: reg, Clock: clk, GroupsInterval: interval})
	require.NoError(t, err)
	newBus := func(cfg event.Config) *event.Bus {
		cfg.Clock, cfg.ExpirySweep = clk, -1
		b, err := event.NewBus(store, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		return b
	}
	// This process publishes and never subscribes.
	mine := newBus(bm.Instrument(event.Config{MemberID: "mine"}))
	require.NoError(t, bm.Watch(mine))
	// Another process: the group's only member.
	obs := &busObserver{acked: make(chan struct{}, 10), deadLettered: make(chan struct{}, 10)}
	other := newBus(event.Config{MemberID: "other", Observer: obs})
	_, err = other.Subscribe(ctx, "orders", "billing", func(_ context.Context, d *event.Delivery) error {
		if string(d.Payload) == `"bad"` {
			return errors.New("cannot bill")
		}
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(1))
	require.NoError(t, err)
	for _, p := range []string{`1`, `"bad"`, `3`} {
		_, err := other.Publish(ctx, "orders", []byte(p))
		require.NoError(t, err)
	}
	receive(t, obs.acked, "ack")
	receive(t, obs.acked, "ack")
	receive(t, obs.deadLettered, "dead letter")

	f := gather(t, reg)
	s := groupSeries(t, f, "orders", "billing")
	assert.Equal(t, 1.0, s.members, "the other process's member")
	assert.Equal(t, 1.0, s.deadLetters)
	assert.Equal(t, 3.0, s.head)
	_, local := value(f, "promlib_consumer_subscribers", "topic", "orders", "group", "billing")
	assert.False(t, local, "no subscriber in this process")
	head, _ := value(f, "promlib_topic_head_seq", "topic", "orders.dlq")
	assert.Equal(t, 1.0, head, "every topic of the store")

	// The other process stops; publishes go on.
	require.NoError(t, other.Close(ctx))
	for _, p := range []string{`4`, `5`} {
		_, err := mine.Publish(ctx, "orders", []byte(p))
		require.NoError(t, err)
	}
	// Within the interval, the values last read are served.
	clk.Advance(interval - time.Second)
	cached := groupSeries(t, gather(t, reg), "orders", "billing")
	assert.Equal(t, s, cached, "the store is read once per GroupsInterval")

	clk.Advance(time.Second)
	s = groupSeries(t, gather(t, reg), "orders", "billing")
	assert.Equal(t, series{lag: 2, lagSeconds: 15, committed: 3, members: 0, deadLetters: 1, head: 5}, s)

	_, err = mine.Publish(ctx, "orders", []byte(`6`))
	require.NoError(t, err)
	clk.Advance(interval)
	f = gather(t, reg)
	s = groupSeries(t, f, "orders", "billing")
	assert.Equal(t, series{lag: 3, lagSeconds: 30, committed: 3, members: 0, deadLetters: 1, head: 6}, s,
		"the lag grows with no member")
	errs, _ := value(f, "promlib_consumer_collect_errors_total")
	assert.Equal(t, 0.0, errs)

	// An operator purges the dead letter: its mark, a cursor of a group
	// on the dead-letter topic, is no consumer.
	res, err := mine.PurgeDeadLetters(ctx, "orders", "billing", nil, 10)
	require.NoError(t, err)
	require.Len(t, res.IDs, 1)
	clk.Advance(interval)
	f = gather(t, reg)
	assert.Equal(t, 0.0, groupSeries(t, f, "orders", "billing").deadLetters)
	assert.Equal(t, []string{"billing"}, labelValues(f, "promlib_consumer_lag", "group"))

	text, _ := scrape(t, reg)
	lint(t, reg, text)
}

// setCursor makes the cursor of group on topic seq.
func setCursor(t *testing.T, bus *event.Bus, topic, group string, seq uint64) {
	t.Helper()
	_, err := bus.ResetCursor(context.Background(), topic, group, event.AtSeq(seq+1), false)
	require.NoError(t, err)
}

// flakyStore fails ListTopics or Head on demand.
type flakyStore struct {
	*event.MemoryStore
	failList, failHead atomic.Bool
}

func (s *flakyStore) ListTopics(ctx context.Context) ([]event.TopicInfo, error) {
	if s.failList.Load() {
		return nil, errors.New("store down")
	}
	return s.MemoryStore.ListTopics(ctx)
}

func (s *flakyStore) Head(ctx context.Context, topic string) (uint64, error) {
	if s.failHead.Load() {
		return 0, errors.New("store down")
	}
	return s.MemoryStore.Head(ctx, topic)
}

// A read of the store's groups that fails keeps the values last read and
// counts; a failed read is not tried again before the interval.
func TestGroupsReadFailureKeepsLastValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	reg := prometheus.NewRegistry()
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: reg, Clock: clk, GroupsInterval: time.Minute})
	require.NoError(t, err)
	store := &flakyStore{MemoryStore: event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})}
	bus, err := event.NewBus(store, bm.Instrument(event.Config{Clock: clk, ExpirySweep: -1}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	require.NoError(t, bm.Watch(bus))
	for range 2 {
		_, err := bus.Publish(ctx, "orders", []byte(`1`))
		require.NoError(t, err)
	}
	// A group with a cursor and no member, as an operator makes one.
	setCursor(t, bus, "orders", "billing", 0)
	s := groupSeries(t, gather(t, reg), "orders", "billing")
	assert.Equal(t, 2.0, s.lag)

	for _, fail := range []*atomic.Bool{&store.failList, &store.failHead} {
		fail.Store(true)
		_, err := bus.Publish(ctx, "orders", []byte(`1`))
		require.NoError(t, err)
		clk.Advance(time.Minute)
		f := gather(t, reg)
		assert.Equal(t, s, groupSeries(t, f, "orders", "billing"), "the values last read")
		fail.Store(false)
		// Not read again before the interval.
		f = gather(t, reg)
		assert.Equal(t, s, groupSeries(t, f, "orders", "billing"))
		errs, _ := value(f, "promlib_consumer_collect_errors_total")
		if fail == &store.failList {
			assert.Equal(t, 1.0, errs)
		} else {
			assert.Equal(t, 2.0, errs)
		}
	}
	clk.Advance(time.Minute)
	assert.Equal(t, 4.0, groupSeries(t, gather(t, reg), "orders", "billing").lag)
}

// Past MaxTopics and MaxGroups, the store's groups add up under
// OtherLabel: lag, members and dead letters summed, lag seconds the
// highest, no committed cursor.
func TestGroupsOfTheStoreBeyondTheBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	reg := prometheus.NewRegistry()
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: reg, Clock: clk, MaxGroups: 1})
	require.NoError(t, err)
	bus, err := event.NewBus(event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}), bm.Instrument(event.Config{Clock: clk, ExpirySweep: -1}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	require.NoError(t, bm.Watch(bus))
	for range 3 {
		_, err := bus.Publish(ctx, "orders", []byte(`1`))
		require.NoError(t, err)
	}
	clk.Advance(10 * time.Second)
	for g, at := range map[string]uint64{"a": 1, "b": 2, "c": 0} {
		setCursor(t, bus, "orders", g, at)
	}
	f := gather(t, reg)
	assert.Equal(t, []string{"a", metrics.OtherLabel}, labelValues(f, "promlib_consumer_lag", "group"))
	s, _ := value(f, "promlib_consumer_lag", "group", metrics.OtherLabel)
	assert.Equal(t, 1.0+3.0, s)
	s, _ = value(f, "promlib_consumer_lag_seconds", "group", metrics.OtherLabel)
	assert.Equal(t, 10.0, s)
	assert.Equal(t, []string{"a"}, labelValues(f, "promlib_consumer_committed_seq", "group"))
}
