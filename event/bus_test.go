package event_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
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
	_, err = b.ResetCursor(ctx, "t", "g", event.AtSeq(3), false)
	require.NoError(t, err)
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
	assert.Equal(t, uint64(3), <-got, "ResetCursor decides where the group resumes")
	st := b.Stats()
	require.Len(t, st, 1)
	assert.Equal(t, "t", st[0].Topic)
	assert.Equal(t, "g", st[0].Group)
	assert.Equal(t, []int{0}, st[0].Partitions)
	assert.Equal(t, 1, st[0].Subscribers)
	require.NoError(t, sub.Close())
	assert.Empty(t, b.Stats(), "the last subscription's close ends the group")
}

// Deliveries waiting in a subscription's queue behind a slow but working
// handler keep their place: the lease counts from when a handler starts.
func TestQueuedDeliveriesKeepTheirPlace(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	b, err := event.NewBus(event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}), event.Config{Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	ctx := context.Background()
	var mu sync.Mutex
	attempts := map[uint64][]int{}
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		attempts[d.Seq] = append(attempts[d.Seq], d.Attempt)
		mu.Unlock()
		clk.Advance(10 * time.Millisecond) // the handler's work takes 10ms
		return nil
	}, event.FromEarliest(), event.WithAckTimeout(40*time.Millisecond), event.WithMaxAttempts(1), event.WithMaxInFlight(30))
	require.NoError(t, err)
	for range 30 {
		_, err := b.Publish(ctx, "t", []byte(`1`))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		clk.Advance(5 * time.Millisecond) // commits come due
		c, err := b.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == 30
	}, 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for seq := uint64(1); seq <= 30; seq++ {
		assert.Equal(t, []int{1}, attempts[seq], "seq %d", seq)
	}
	head, err := b.Store().Head(ctx, "t.dlq")
	require.NoError(t, err)
	assert.Zero(t, head, "nothing dead-lettered")
}

// A subscription whose handler is stuck gives its queued deliveries back
// to the group, where another subscription takes them.
func TestStuckSubscriptionGivesBackItsQueue(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	release := make(chan struct{})
	defer close(release)
	stuckSeqs := make(chan uint64, 100)
	_, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		stuckSeqs <- d.Seq
		<-release
		return nil
	}, event.FromEarliest(), event.WithAckTimeout(50*time.Millisecond), event.WithMaxInFlight(10), event.WithDrainTimeout(time.Second))
	require.NoError(t, err)
	for range 10 {
		_, err := b.Publish(ctx, "t", []byte(`1`))
		require.NoError(t, err)
	}
	first := <-stuckSeqs
	var got sync.Map
	var n atomic.Int32
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		if _, dup := got.LoadOrStore(d.Seq, true); !dup {
			n.Add(1)
		}
		return nil
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return n.Load() == 10 }, 10*time.Second, 5*time.Millisecond,
		"the free subscription gets everything, %d stuck at the other", first)
}

// TestPublishTimestamp checks where a record's TS comes from: with the
// system clock it is the millisecond its UUIDv7 holds, within the time of
// the call; with an injected clock it is that clock's time; WithTS wins
// over both.
func TestPublishTimestamp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	b, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer b.Close(ctx)
	before := time.Now().UnixMilli()
	rec, err := b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	after := time.Now().UnixMilli()
	id, err := uuid.Parse(rec.ID)
	require.NoError(t, err)
	require.Equal(t, uuid.Version(7), id.Version())
	sec, nsec := id.Time().UnixTime()
	assert.Equal(t, sec*1000+nsec/1e6, rec.TS, "TS is the id's time")
	assert.GreaterOrEqual(t, rec.TS, before)
	assert.LessOrEqual(t, rec.TS, after)

	fake := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	fb, err := event.NewBus(event.NewMemoryStore(), event.Config{Clock: fake})
	require.NoError(t, err)
	defer fb.Close(ctx)
	rec, err = fb.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	assert.Equal(t, fake.Now().UnixMilli(), rec.TS, "TS is the injected clock's")

	rec, err = b.Publish(ctx, "t", []byte(`1`), event.WithTS(42))
	require.NoError(t, err)
	assert.Equal(t, int64(42), rec.TS)
}
