package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// The Handler samples the charts every ChartInterval of its clock: per
// topic the publish and deliver rates between two samples, per group its
// lag. Each series keeps ChartWindow/ChartInterval+1 points, so a page
// opened (or reloaded) later gets the whole window; since gives only the
// newer points. The clock is moved by hand: no sleep.
func TestChartsSampledByTheClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	bus := newBus(t)
	clk := clock.NewFake(time.UnixMilli(1_000_000))
	h := newHandler(t, ops.Config{Bus: bus, Clock: clk, ChartWindow: time.Minute, ChartInterval: 10 * time.Second})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })

	acked := make(chan struct{}, 1000)
	_, err := bus.Subscribe(ctx, "orders", "billing", func(context.Context, *event.Delivery) error {
		acked <- struct{}{}
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	// Run takes its first sample at once: the group must be there by
	// then, or the first sample has neither its lag nor the topic's
	// counts that the rates of the second are taken from.
	require.Eventually(t, func() bool { _, err := bus.Cursor(ctx, "orders", "billing"); return err == nil }, 10*time.Second, time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() { // before the Bus closes
		cancel()
		require.NoError(t, <-done)
	})

	// samples waits for the n-th sample and for Run to arm its next timer.
	samples := func(n int) ops.ChartsResponse {
		t.Helper()
		var r ops.ChartsResponse
		require.Eventually(t, func() bool { r = h.Charts("", 0); return r.Samples == n }, 10*time.Second, time.Millisecond)
		require.NoError(t, clk.WaitTimers(ctx, 1))
		return r
	}
	step := func(n int) ops.ChartsResponse {
		t.Helper()
		clk.Advance(10 * time.Second)
		return samples(n)
	}

	r := samples(1) // the first sample, at once
	assert.Equal(t, int64(60_000), r.WindowMs)
	assert.Equal(t, int64(10_000), r.IntervalMs)

	publishN(t, bus, "orders", 50)
	for range 50 {
		<-acked
	}
	waitCommitted(t, bus, "orders", "billing", 50)
	r = step(2)
	require.Len(t, r.Topics, 1)
	assert.Equal(t, []ops.ChartPoint{{T: 1_010_000, V: 5}}, r.Topics[0].Publish, "50 events in 10s")
	assert.Equal(t, []ops.ChartPoint{{T: 1_010_000, V: 5}}, r.Topics[0].Deliver)
	require.Len(t, r.Groups, 1)
	assert.Equal(t, []ops.ChartPoint{{T: 1_000_000, V: 0}, {T: 1_010_000, V: 0}}, r.Groups[0].Lag)

	// A group that falls behind: its lag shows, the deliver rate drops.
	_, err = bus.Subscribe(ctx, "orders", "slow", func(context.Context, *event.Delivery) error {
		<-release
		return nil
	}, event.FromLatest())
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := bus.Cursor(ctx, "orders", "slow"); return err == nil }, 10*time.Second, time.Millisecond)
	publishN(t, bus, "orders", 20)
	for range 20 {
		<-acked
	}
	waitCommitted(t, bus, "orders", "billing", 70)
	r = step(3)
	assert.Equal(t, ops.ChartPoint{T: 1_020_000, V: 2}, r.Topics[0].Publish[1])
	require.Len(t, r.Groups, 2)
	assert.Equal(t, "slow", r.Groups[1].Group)
	assert.Equal(t, []ops.ChartPoint{{T: 1_020_000, V: 20}}, r.Groups[1].Lag)

	// Only the points after since.
	newer := h.Charts("orders", 1_010_000)
	assert.Equal(t, []ops.ChartPoint{{T: 1_020_000, V: 2}}, newer.Topics[0].Publish)
	assert.Empty(t, h.Charts("other", 0).Topics)

	// Past the window, each series keeps its last 7 points (60s / 10s + 1).
	for n := 4; n <= 12; n++ {
		r = step(n)
	}
	assert.Len(t, r.Groups[0].Lag, 7)
	assert.Len(t, r.Topics[0].Publish, 7)
	assert.Equal(t, int64(1_110_000), r.Topics[0].Publish[6].T, "newest last")
	assert.Equal(t, int64(1_050_000), r.Topics[0].Publish[0].T)
	assert.Equal(t, int64(1_110_000), r.LastSample)
}

func waitCommitted(t *testing.T, bus *event.Bus, topic, group string, seq uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := bus.Cursor(context.Background(), topic, group)
		return err == nil && c.Seq == seq
	}, 10*time.Second, time.Millisecond)
}

// GET /ops/charts needs a principal that may inspect (401, 403) and shows
// only the series of what it may inspect.
func TestChartsAuth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus, Verifier: testVerifier(t, map[string][]string{
		"all":    {"inspect:**"},
		"a":      {"inspect:a.*"},
		"nobody": {"publish:**"},
	})})
	for _, topic := range []string{"a.x", "b.secret"} {
		_, err := bus.Publish(ctx, topic, []byte(`1`))
		require.NoError(t, err)
	}
	require.NoError(t, h.Sample(ctx))
	callAs(t, h, "GET", "/ops/charts", "", 401)
	callAs(t, h, "GET", "/ops/charts", "nobody", 403)
	callAs(t, h, "GET", "/ops/charts?topic=b.secret", "a", 403)
	body := callAs(t, h, "GET", "/ops/charts", "a", 200)
	assert.Contains(t, body, `"a.x"`)
	assert.NotContains(t, body, "secret")
	body = callAs(t, h, "GET", "/ops/charts", "all", 200)
	assert.Contains(t, body, `"b.secret"`)
}
