package event_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// Close waits for running handlers; one that outlives the context makes
// Close report it, and its handler context is cancelled.
func TestCloseWithStuckHandler(t *testing.T) {
	t.Parallel()
	b, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	started := make(chan struct{})
	cancelled := make(chan struct{})
	_, err = b.Subscribe(ctx, "t", "g", func(hctx context.Context, d *event.Delivery) error {
		close(started)
		<-hctx.Done()
		close(cancelled)
		return hctx.Err()
	}, event.FromEarliest())
	require.NoError(t, err)
	_, err = b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	<-started
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = b.Close(cctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	<-cancelled
	require.NoError(t, b.Close(ctx), "Close is idempotent")
}

// A handler's panic is recovered and nacks the delivery.
func TestHandlerPanicNacks(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	var calls atomic.Int32
	done := make(chan int, 1)
	_, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		done <- d.Attempt
		return nil
	}, event.FromEarliest(), event.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	_, err = b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	assert.Equal(t, 2, <-done)
}

// Subscription.Close lets a running handler finish (auto-ack), then the
// subscription is done.
func TestSubscriptionCloseDrains(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	release := make(chan struct{})
	running := make(chan struct{})
	sub, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		close(running)
		<-release
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	_, err = b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	<-running
	closed := make(chan error, 1)
	go func() { closed <- sub.Close() }()
	select {
	case <-sub.Done():
		t.Fatal("Close returned before the running handler finished")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-closed)
	<-sub.Done()
	c, err := b.Cursor(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), c.Seq, "the drained handler's ack was committed")
}

func TestStatsAndCursor(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	_, err := b.Cursor(ctx, "t", "g")
	assert.ErrorIs(t, err, event.ErrNotFound)
	_, err = b.Cursor(ctx, "t t", "g")
	assert.ErrorIs(t, err, event.ErrInvalid)
	require.NoError(t, b.SetCursor(ctx, "t", "g", 2))
	for range 3 {
		_, err := b.Publish(ctx, "t", []byte(`1`))
		require.NoError(t, err)
	}
	got := make(chan uint64, 3)
	sub, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		got <- d.Seq
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	assert.Equal(t, uint64(3), <-got, "SetCursor decides where the group resumes")
	st := b.Stats()
	require.Len(t, st, 1)
	assert.Equal(t, "t", st[0].Topic)
	assert.Equal(t, "g", st[0].Group)
	assert.Equal(t, []int{0}, st[0].Partitions)
	assert.Equal(t, 1, st[0].Subscribers)
	require.NoError(t, sub.Close())
	assert.Empty(t, b.Stats(), "the last subscription's close ends the group")
}
