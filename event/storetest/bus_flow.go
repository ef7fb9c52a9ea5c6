package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

func testMaxInFlight(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(), event.WithMaxInFlight(3))
	pubN(t, b, "t", 10)
	require.Eventually(t, func() bool { return c.len() == 3 }, wait, tick)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, 3, c.len(), "no more than MaxInFlight outstanding")
	ctx := context.Background()
	for i := 0; c.len() < 10 || i < c.len(); i++ {
		require.Eventually(t, func() bool { return c.len() > i }, wait, tick)
		require.NoError(t, c.snapshot()[i].Ack(ctx))
	}
	waitCursor(t, b, "t", "g", 10)
	assert.Equal(t, 10, c.distinct(), "flow control waits, never drops")
}

func testFilter(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithFilter(func(r *event.Record) bool {
		return r.Seq%2 == 0
	}))
	pubN(t, b, "t", 20)
	waitCursor(t, b, "t", "g", 20)
	assert.Equal(t, 10, c.len())
	for _, seq := range c.seqList() {
		assert.Zero(t, seq%2)
	}
}

func testPauseResume(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	sub := subscribe(t, b, "t", "g", c.handler, event.FromEarliest())
	sub.Pause()
	pubN(t, b, "t", 5)
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, c.len(), "nothing is delivered while paused")
	sub.Resume()
	waitCursor(t, b, "t", "g", 5)
	assert.Equal(t, 5, c.len())
}

func testCloseInFlight(t *testing.T, s event.Store) {
	ctx := context.Background()
	b1 := newBus(t, s)
	c := newCollector()
	subscribe(t, b1, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck())
	pubN(t, b1, "t", 10)
	require.Eventually(t, func() bool { return c.len() == 10 }, wait, tick)
	for _, d := range c.snapshot()[:4] {
		require.NoError(t, d.Ack(ctx))
	}
	require.NoError(t, b1.Close(ctx))
	_, err := b1.Publish(ctx, "t", []byte(`1`))
	assert.ErrorIs(t, err, event.ErrClosed, "a closed bus publishes nothing")
	_, err = b1.Cursor(ctx, "t", "g")
	assert.ErrorIs(t, err, event.ErrClosed)
	_, err = b1.Subscribe(ctx, "t", "g", c.handler)
	assert.ErrorIs(t, err, event.ErrClosed)

	b2 := newBus(t, s)
	assert.Equal(t, uint64(4), cursorOf(t, b2, "t", "g"), "Close commits the settled prefix")
	_, err = b2.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	c2 := newCollector()
	subscribe(t, b2, "t", "g", c2.handler)
	waitCursor(t, b2, "t", "g", 11)
	assert.Equal(t, []uint64{5, 6, 7, 8, 9, 10, 11}, c2.seqList())
}

func testUnsubscribeGivesBack(t *testing.T, s event.Store) {
	b := newBus(t, s)
	slow, fast := newCollector(), newCollector()
	sub := subscribe(t, b, "t", "g", slow.handler, event.FromEarliest(), event.WithManualAck(),
		event.WithAckTimeout(time.Hour), event.WithMaxInFlight(5))
	pubN(t, b, "t", 5)
	require.Eventually(t, func() bool { return slow.len() == 5 }, wait, tick)
	subscribe(t, b, "t", "g", fast.handler)
	require.NoError(t, sub.Close())
	require.Eventually(t, func() bool { return fast.len() == 5 }, wait, tick, "given-back deliveries go to the other subscriber at once")
	for _, d := range fast.snapshot() {
		assert.Equal(t, 2, d.Attempt)
	}
	waitCursor(t, b, "t", "g", 5)
}
