package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testAcksOutliveSubscribers: acks above an un-acked record stay acked when
// the group's last subscriber leaves, and the attempt count goes on.
func testAcksOutliveSubscribers(t *testing.T, s event.Store) {
	b := newBus(t, s)
	ctx := context.Background()
	c := newCollector()
	opts := []event.SubscribeOption{event.FromEarliest(), event.WithManualAck(), event.WithMaxInFlight(20), event.WithAckTimeout(time.Minute)}
	sub := subscribe(t, b, "t", "g", c.handler, opts...)
	recs := pubN(t, b, "t", 20)
	require.Eventually(t, func() bool { return c.len() == 20 }, wait, tick)
	for _, d := range c.snapshot() {
		if d.Seq != recs[0].Seq {
			require.NoError(t, d.Ack(ctx))
		}
	}
	require.NoError(t, sub.Close()) // the last subscriber leaves
	assert.Equal(t, uint64(0), cursorOf(t, b, "t", "g"))

	again := newCollector()
	subscribe(t, b, "t", "g", again.handler, opts...)
	require.Eventually(t, func() bool { return again.len() >= 1 }, wait, tick)
	d := again.snapshot()[0]
	assert.Equal(t, recs[0].ID, d.ID, "only the un-acked record comes back")
	assert.Equal(t, 2, d.Attempt, "its attempts go on")
	require.NoError(t, d.Ack(ctx))
	waitCursor(t, b, "t", "g", 20)
	assert.Equal(t, 1, again.len(), "no acked record is delivered again")
	if gs, ok := s.(event.GroupStateStore); ok {
		require.Eventually(t, func() bool {
			st, err := gs.GroupState(ctx, event.PartitionRef{Topic: "t", Group: "g"})
			return err == nil && len(st.Attempts)+len(st.Settled) == 0
		}, wait, tick, "the state the cursor passed is forgotten")
	}
}

// testAttemptsOutliveSubscribers: a record nacked once on each of several
// subscriptions in turn reaches the dead-letter topic after MaxAttempts.
func testAttemptsOutliveSubscribers(t *testing.T, s event.Store) {
	b := newBus(t, s)
	ctx := context.Background()
	opts := []event.SubscribeOption{event.FromEarliest(), event.WithManualAck(), event.WithMaxAttempts(3),
		event.WithBackoff(time.Millisecond, time.Millisecond)}
	pubN(t, b, "t", 1)
	for attempt := 1; attempt <= 3; attempt++ {
		c := newCollector()
		sub := subscribe(t, b, "t", "g", c.handler, opts...)
		require.Eventually(t, func() bool { return c.len() >= 1 }, wait, tick, "attempt %d", attempt)
		d := c.snapshot()[0]
		assert.Equal(t, attempt, d.Attempt)
		require.NoError(t, d.Nack(ctx, "poison"))
		require.NoError(t, sub.Close())
	}
	late := newCollector()
	subscribe(t, b, "t", "g", late.handler, opts...)
	dl := newCollector()
	subscribe(t, b, event.DeadLetterTopic("t"), "inspect", dl.handler, event.FromEarliest())
	waitCursor(t, b, "t", "g", 1)
	require.Eventually(t, func() bool { return dl.len() == 1 }, wait, tick)
	assert.Equal(t, "3", dl.snapshot()[0].Headers[event.HeaderDLQAttempt])
	assert.Zero(t, late.len(), "no attempt beyond MaxAttempts")
}

// testGroupStateStore checks the GroupStateStore contract.
func testGroupStateStore(t *testing.T, s event.Store) {
	gs, ok := s.(event.GroupStateStore)
	if !ok {
		t.Skip("store does not implement GroupStateStore")
	}
	ctx := context.Background()
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 1}
	other := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	st, err := gs.GroupState(ctx, p)
	require.NoError(t, err)
	assert.Empty(t, st.Attempts)
	assert.Empty(t, st.Settled)

	require.NoError(t, gs.UpdateGroupState(ctx, p, event.GroupStateUpdate{
		Attempts: map[uint64]int{3: 2, 4: 1, 7: 1}, Settled: []uint64{5, 6},
	}, event.Fence{}))
	require.NoError(t, gs.UpdateGroupState(ctx, p, event.GroupStateUpdate{
		Attempts: map[uint64]int{3: 1, 4: 3, 5: 9}, // never lowered; settled stays settled
		Settled:  []uint64{7, 9},
	}, event.Fence{}))
	require.NoError(t, gs.UpdateGroupState(ctx, other, event.GroupStateUpdate{Settled: []uint64{1}}, event.Fence{}))
	st, err = gs.GroupState(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, map[uint64]int{3: 2, 4: 3}, st.Attempts)
	assert.Equal(t, []uint64{5, 6, 7, 9}, st.Settled)

	require.NoError(t, gs.UpdateGroupState(ctx, p, event.GroupStateUpdate{Forget: []uint64{3, 5, 6, 8}}, event.Fence{}))
	st, err = gs.GroupState(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, map[uint64]int{4: 3}, st.Attempts)
	assert.Equal(t, []uint64{7, 9}, st.Settled)

	big := map[uint64]int{}
	for i := uint64(100); i < 400; i++ {
		big[i] = int(i%7) + 1
	}
	require.NoError(t, gs.UpdateGroupState(ctx, p, event.GroupStateUpdate{Attempts: big}, event.Fence{}))
	st, err = gs.GroupState(ctx, p)
	require.NoError(t, err)
	assert.Len(t, st.Attempts, 301)

	require.NoError(t, gs.ResetGroupState(ctx, p))
	st, err = gs.GroupState(ctx, p)
	require.NoError(t, err)
	assert.Empty(t, st.Attempts)
	assert.Empty(t, st.Settled)
	st, err = gs.GroupState(ctx, other)
	require.NoError(t, err)
	assert.Equal(t, []uint64{1}, st.Settled, "other partitions keep theirs")

	err = gs.UpdateGroupState(ctx, p, event.GroupStateUpdate{Attempts: map[uint64]int{1: 0}}, event.Fence{})
	assert.ErrorIs(t, err, event.ErrInvalid)
	assert.ErrorContains(t, err, "Attempts")
}

// testQueuedIsNoAttempt: deliveries that waited in a closing
// subscription's queue and never reached its handler come back at the same
// attempt; the one the handler had counts.
func testQueuedIsNoAttempt(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	release := make(chan struct{})
	opts := []event.SubscribeOption{event.FromEarliest(), event.WithManualAck(), event.WithMaxInFlight(5),
		event.WithConcurrency(1), event.WithAckTimeout(time.Minute), event.WithDrainTimeout(20 * time.Millisecond)}
	sub := subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		c.add(d)
		<-release // the other four wait in the queue
		return nil
	}, opts...)
	recs := pubN(t, b, "t", 5)
	require.Eventually(t, func() bool { return c.len() == 1 }, wait, tick)
	// Close stops the queue, waits DrainTimeout for the running handler and
	// gives everything back.
	assert.ErrorIs(t, sub.Close(), context.DeadlineExceeded, "the handler was still running")
	close(release)

	again := newCollector()
	subscribe(t, b, "t", "g", again.handler, opts...)
	require.Eventually(t, func() bool { return again.len() == 5 }, wait, tick)
	for _, d := range again.snapshot() {
		want := 1
		if d.ID == recs[0].ID {
			want = 2 // its handler had it
		}
		assert.Equal(t, want, d.Attempt, "seq %d", d.Seq)
	}
}

// testLastAttemptLeft: a record whose last attempt was in flight when its
// subscriber left is dead-lettered, not delivered beyond MaxAttempts.
func testLastAttemptLeft(t *testing.T, s event.Store) {
	b := newBus(t, s)
	opts := []event.SubscribeOption{event.FromEarliest(), event.WithManualAck(), event.WithMaxAttempts(2), event.WithAckTimeout(time.Minute)}
	recs := pubN(t, b, "t", 1)
	for attempt := 1; attempt <= 2; attempt++ {
		c := newCollector()
		sub := subscribe(t, b, "t", "g", c.handler, opts...)
		require.Eventually(t, func() bool { return c.len() >= 1 }, wait, tick, "attempt %d", attempt)
		assert.Equal(t, attempt, c.snapshot()[0].Attempt)
		require.NoError(t, sub.Close()) // leaves with the delivery unsettled
	}
	late := newCollector()
	subscribe(t, b, "t", "g", late.handler, opts...)
	dl := newCollector()
	subscribe(t, b, event.DeadLetterTopic("t"), "inspect", dl.handler, event.FromEarliest())
	waitCursor(t, b, "t", "g", 1)
	require.Eventually(t, func() bool { return dl.len() == 1 }, wait, tick)
	d := dl.snapshot()[0]
	assert.Equal(t, recs[0].ID, d.Headers[event.HeaderDLQID])
	assert.Equal(t, "2", d.Headers[event.HeaderDLQAttempt])
	assert.Zero(t, late.len(), "no attempt beyond MaxAttempts")
}
