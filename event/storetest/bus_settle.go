package storetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

func testOutOfOrderAcks(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(), event.WithAckTimeout(time.Minute))
	pubN(t, b, "t", 5)
	require.Eventually(t, func() bool { return c.len() == 5 }, wait, tick)
	ds := c.snapshot()
	ctx := context.Background()
	for _, d := range ds[1:] {
		require.NoError(t, d.Ack(ctx))
	}
	// Commits run every few ms; give them a chance to (wrongly) move.
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, uint64(0), cursorOf(t, b, "t", "g"), "acks after an un-acked record must not move the cursor")
	require.NoError(t, ds[0].Ack(ctx))
	waitCursor(t, b, "t", "g", 5)
	assert.ErrorIs(t, ds[0].Ack(ctx), event.ErrNotInFlight, "a second ack is refused")
}

func testNackRedelivers(t *testing.T, s event.Store) {
	b, ft := newFakeBus(t, s)
	var calls atomic.Int32
	c := newCollector()
	subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		c.add(d)
		if calls.Add(1) == 1 {
			return assert.AnError
		}
		return nil
	}, event.FromEarliest(), event.WithBackoff(10*time.Millisecond, 10*time.Millisecond))
	pubN(t, b, "t", 1)
	ft.eventually(time.Millisecond, func() bool { return c.len() == 2 })
	ds := c.snapshot()
	assert.Equal(t, 1, ds[0].Attempt)
	assert.Equal(t, 2, ds[1].Attempt)
	assert.Equal(t, ds[0].ID, ds[1].ID)
	assert.GreaterOrEqual(t, ds[1].Deadline.Sub(ds[0].Deadline), 10*time.Millisecond, "redelivered after the backoff")
	ft.waitCursor(b, "t", "g", 1)
}

func testLeaseExpiry(t *testing.T, s event.Store) {
	b, ft := newFakeBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(),
		event.WithAckTimeout(200*time.Millisecond), event.WithBackoff(time.Millisecond, time.Millisecond))
	pubN(t, b, "t", 1)
	require.Eventually(t, func() bool { return c.len() == 1 }, wait, tick)
	ft.clk.Advance(200 * time.Millisecond) // the lease ends
	ft.eventually(time.Millisecond, func() bool { return c.len() >= 2 })
	ds := c.snapshot()
	assert.Equal(t, 2, ds[1].Attempt)
	assert.Equal(t, uint64(0), cursorOf(t, b, "t", "g"))
	ackLatest(t, c)
	ft.waitCursor(b, "t", "g", 1)
}

// ackLatest acks the collector's latest delivery. If that one's lease
// ended too before the ack landed, the next one is acked.
func ackLatest(t *testing.T, c *collector) {
	t.Helper()
	require.Eventually(t, func() bool {
		ds := c.snapshot()
		return ds[len(ds)-1].Ack(context.Background()) == nil
	}, wait, tick)
}

func testModAck(t *testing.T, s event.Store) {
	b, ft := newFakeBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(),
		event.WithAckTimeout(150*time.Millisecond), event.WithBackoff(time.Millisecond, time.Millisecond))
	pubN(t, b, "t", 1)
	require.Eventually(t, func() bool { return c.len() == 1 }, wait, tick)
	d := c.snapshot()[0]
	ctx := context.Background()
	// Keep extending past several original deadlines.
	for range 20 {
		require.NoError(t, d.ModAck(ctx, 150*time.Millisecond))
		ft.clk.Advance(30 * time.Millisecond)
	}
	assert.Equal(t, 1, c.len(), "a lease kept alive by ModAck is not redelivered")
	require.NoError(t, d.Ack(ctx))
	ft.waitCursor(b, "t", "g", 1)
	assert.ErrorIs(t, d.ModAck(ctx, time.Second), event.ErrNotInFlight)
}

func testStaleAck(t *testing.T, s event.Store) {
	b, ft := newFakeBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(),
		event.WithAckTimeout(80*time.Millisecond), event.WithBackoff(time.Millisecond, time.Millisecond))
	pubN(t, b, "t", 1)
	require.Eventually(t, func() bool { return c.len() == 1 }, wait, tick)
	ft.clk.Advance(80 * time.Millisecond) // the first lease ends
	ft.eventually(time.Millisecond, func() bool { return c.len() >= 2 })
	ds := c.snapshot()
	ctx := context.Background()
	err := ds[0].Ack(ctx)
	assert.ErrorIs(t, err, event.ErrStaleAck, "an ack of an expired attempt is refused")
	assert.ErrorIs(t, ds[0].Nack(ctx, "late"), event.ErrStaleAck)
	assert.Equal(t, uint64(0), cursorOf(t, b, "t", "g"), "a stale ack settles nothing")
	ft.eventually(time.Millisecond, func() bool {
		last := c.snapshot()[c.len()-1]
		return b.Ack(ctx, event.AttemptRef{Topic: "t", Group: "g", ID: last.ID, Attempt: last.Attempt}) == nil
	})
	ft.waitCursor(b, "t", "g", 1)
}

func testDeadLetter(t *testing.T, s event.Store) {
	b, ft := newFakeBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		c.add(d)
		if string(d.Payload) == `{"i":1}` {
			return assert.AnError
		}
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(3), event.WithBackoff(time.Millisecond, 5*time.Millisecond))
	dl := newCollector()
	subscribe(t, b, event.DeadLetterTopic("t"), "inspect", dl.handler, event.FromEarliest())
	recs := pubN(t, b, "t", 3)
	ft.waitCursor(b, "t", "g", 3)
	ft.eventually(time.Millisecond, func() bool { return dl.len() == 1 })
	d := dl.snapshot()[0]
	assert.Equal(t, recs[1].ID, d.Headers[event.HeaderDLQID])
	assert.Equal(t, "3", d.Headers[event.HeaderDLQAttempt])
	assert.Equal(t, "g", d.Headers[event.HeaderDLQGroup])
	assert.Equal(t, "t", d.Headers[event.HeaderDLQTopic])
	assert.Contains(t, d.Headers[event.HeaderDLQReason], assert.AnError.Error())
	assert.JSONEq(t, `{"i":1}`, string(d.Payload))
	attempts := 0
	for _, x := range c.snapshot() {
		if x.ID == recs[1].ID {
			attempts++
		}
	}
	assert.Equal(t, 3, attempts)
}
