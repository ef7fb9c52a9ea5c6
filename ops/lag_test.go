package ops_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// A burst published while the only consumer is paused is all lag; once it
// resumes and acks everything, the lag is back to 0.
func TestLagAfterBurst(t *testing.T) {
	t.Parallel()
	const n = 10_000
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus})
	ctx := context.Background()

	var handled atomic.Int64
	sub, err := bus.Subscribe(ctx, "orders", "billing", func(ctx context.Context, d *event.Delivery) error {
		handled.Add(1)
		return nil
	}, event.WithMaxInFlight(500))
	require.NoError(t, err)
	sub.Pause()

	publishN(t, bus, "orders", n)

	var lag event.GroupStatus
	getJSON(t, h, "/ops/lag?topic=orders&group=billing", &lag)
	assert.Equal(t, uint64(n), lag.Head)
	assert.Equal(t, uint64(0), lag.Committed)
	assert.Equal(t, uint64(n), lag.Lag)
	require.NotNil(t, lag.Oldest)
	assert.Equal(t, uint64(1), lag.Oldest.Seq)
	assert.GreaterOrEqual(t, lag.LagMs, int64(0))
	assert.Zero(t, handled.Load(), "a paused subscription gets nothing")

	var topics ops.TopicsResponse
	getJSON(t, h, "/ops/topics", &topics)
	require.Len(t, topics.Topics, 1)
	require.Len(t, topics.Topics[0].Groups, 1)
	g := topics.Topics[0].Groups[0]
	assert.Equal(t, "billing", g.Group)
	assert.Equal(t, uint64(n), g.Lag)
	require.NotNil(t, g.Local, "subscribers here")
	assert.Equal(t, 1, g.Local.Subscribers)

	sub.Resume()
	require.Eventually(t, func() bool {
		getJSON(t, h, "/ops/lag?topic=orders&group=billing", &lag)
		return lag.Lag == 0
	}, 30*time.Second, 20*time.Millisecond, "lag stays at %d", lag.Lag)
	assert.Equal(t, uint64(n), lag.Committed)
	assert.Zero(t, lag.LagMs)
	assert.Nil(t, lag.Oldest)
	assert.Equal(t, int64(n), handled.Load())

	var inflight ops.InflightResponse
	getJSON(t, h, "/ops/inflight", &inflight)
	require.Len(t, inflight.Groups, 1)
	assert.Equal(t, 0, inflight.InFlight)
	assert.Equal(t, "orders", inflight.Groups[0].Topic)
}

// Lag in ms is the age of the oldest unsettled record, by the Bus's
// clock.
func TestLagMs(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_060_000)
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{Clock: clock.NewFake(now)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	h := newHandler(t, ops.Config{Bus: bus, Groups: map[string][]string{"jobs": {"w"}}})
	ctx := context.Background()
	for i, ts := range []int64{1_700_000_000_000, 1_700_000_030_000, 1_700_000_050_000} {
		_, err := bus.Publish(ctx, "jobs", []byte(`1`), event.WithTS(ts), event.WithID(string(rune('a'+i))))
		require.NoError(t, err)
	}
	_, err = bus.ResetCursor(ctx, "jobs", "w", event.AtSeq(2), false)
	require.NoError(t, err)

	var lag event.GroupStatus
	getJSON(t, h, "/ops/lag?topic=jobs&group=w", &lag)
	assert.Equal(t, uint64(2), lag.Lag)
	assert.Equal(t, int64(30_000), lag.LagMs)
	assert.Equal(t, &event.RecordRef{Seq: 2, ID: "b", TS: 1_700_000_030_000}, lag.Oldest)

	var cursors ops.CursorsResponse
	getJSON(t, h, "/ops/cursors?topic=jobs", &cursors)
	assert.Equal(t, uint64(3), cursors.Head)
	require.Len(t, cursors.Cursors, 1)
	assert.Equal(t, "w", cursors.Cursors[0].Group)
	assert.Equal(t, uint64(1), cursors.Cursors[0].Seq)

	_, err = bus.ResetCursor(ctx, "jobs", "w", event.AtSeq(4), false)
	require.NoError(t, err)
	getJSON(t, h, "/ops/lag?topic=jobs&group=w", &lag)
	assert.Zero(t, lag.Lag)
	assert.Zero(t, lag.LagMs)
}
