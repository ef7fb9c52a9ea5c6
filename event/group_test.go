package event_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// stallingStore is a memory store whose Read blocks, once stall is set,
// until the test ends or release is closed.
type stallingStore struct {
	*event.MemoryStore
	stall   atomic.Bool
	stalled chan struct{} // closed when a Read blocks
	release chan struct{}
	once    sync.Once
}

func (s *stallingStore) Read(ctx context.Context, topic string, after uint64, limit int) ([]event.Record, error) {
	if s.stall.Load() {
		s.once.Do(func() { close(s.stalled) })
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.MemoryStore.Read(ctx, topic, after, limit)
}

// ReadInto goes through Read: the embedded store's would skip the stall.
func (s *stallingStore) ReadInto(ctx context.Context, topic string, after uint64, limit int, buf []event.Record) ([]event.Record, error) {
	recs, err := s.Read(ctx, topic, after, limit)
	return append(buf, recs...), err
}

// An expired lease is redelivered while the group's store I/O is stuck:
// expiry waits for no store call.
func TestExpiryDoesNotWaitForStoreCalls(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := &stallingStore{
		MemoryStore: event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}),
		stalled:     make(chan struct{}),
		release:     make(chan struct{}),
	}
	b, err := event.NewBus(st, event.Config{Clock: clk})
	require.NoError(t, err)
	ctx := context.Background()
	defer func() {
		close(st.release)
		assert.NoError(t, b.Close(ctx))
	}()
	var mu sync.Mutex
	var got []event.Delivery
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		got = append(got, *d)
		mu.Unlock()
		return nil
	}, event.FromEarliest(), event.WithManualAck(), event.WithAckTimeout(time.Second),
		event.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	deliveries := func() []event.Delivery {
		mu.Lock()
		defer mu.Unlock()
		return append([]event.Delivery(nil), got...)
	}
	first, err := b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(deliveries()) == 1 }, 5*time.Second, time.Millisecond)

	// The next read blocks: publish so that the group reads.
	st.stall.Store(true)
	_, err = b.Publish(ctx, "t", []byte(`2`))
	require.NoError(t, err)
	<-st.stalled

	clk.Advance(time.Second + time.Millisecond)
	require.Eventually(t, func() bool {
		clk.Advance(time.Millisecond) // through the redelivery backoff
		return len(deliveries()) == 2
	}, 5*time.Second, time.Millisecond, "the expired delivery was not redelivered while a read was blocked")
	d := deliveries()[1]
	assert.Equal(t, first.ID, d.ID)
	assert.Equal(t, 2, d.Attempt)
}

// Acks by reference ([Bus.Ack], as the WebSocket gateway sends them) find
// their delivery whether it was delivered before or after the first such
// ack, and refuse a settled record or an ended attempt, while a group
// settled through its Delivery values keeps no index by id.
func TestAckByReference(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	got := make(chan *event.Delivery, 64)
	_, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		got <- d
		return nil
	}, event.FromEarliest(), event.WithManualAck(), event.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	publish := func(n int) []*event.Delivery {
		for i := range n {
			_, err := b.Publish(ctx, "t", []byte(`1`), event.WithKey(string(rune('a'+i))))
			require.NoError(t, err)
		}
		ds := make([]*event.Delivery, n)
		for i := range ds {
			ds[i] = <-got
		}
		return ds
	}
	ref := func(d *event.Delivery, attempt int) event.AttemptRef {
		return event.AttemptRef{Topic: "t", Group: "g", ID: d.ID, Attempt: attempt}
	}
	first := publish(4)
	require.Len(t, b.Deliveries("t", "g"), 4, "every delivery is listed")
	require.NoError(t, first[0].Ack(ctx))
	require.NoError(t, b.Ack(ctx, ref(first[1], 1)), "delivered before the first ack by reference")
	assert.ErrorIs(t, b.Ack(ctx, ref(first[0], 1)), event.ErrNotInFlight, "settled through its Delivery")
	assert.ErrorIs(t, b.Ack(ctx, ref(first[1], 1)), event.ErrNotInFlight, "settled by reference")

	later := publish(2)
	require.NoError(t, b.Ack(ctx, ref(later[0], 1)), "delivered after the first ack by reference")
	require.NoError(t, b.Nack(ctx, ref(first[2], 1), "again"))
	again := <-got
	require.Equal(t, first[2].ID, again.ID)
	require.Equal(t, 2, again.Attempt)
	assert.ErrorIs(t, b.Ack(ctx, ref(first[2], 1)), event.ErrStaleAck, "an ended attempt")
	require.NoError(t, b.Ack(ctx, ref(first[2], 2)))
	require.NoError(t, later[1].Ack(ctx))
	require.NoError(t, b.Ack(ctx, ref(first[3], 1)))
	assert.Empty(t, b.Deliveries("t", "g"))
	require.Eventually(t, func() bool {
		st := b.Stats()
		return len(st) == 1 && st[0].Committed == 6
	}, 5*time.Second, time.Millisecond, "every record settled once")
}

// A delivery that comes while a handler of the subscription runs long
// gets a handler goroutine of its own when Concurrency has room: it does
// not wait for the running one. Here the first record's handler returns
// only once the second one's handler has run.
func TestConcurrencyDoesNotWaitForARunningHandler(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	second := make(chan struct{})
	firstRunning := make(chan struct{})
	failed := make(chan struct{})
	t.Cleanup(func() { close(failed) }) // before the bus closes, which waits for the handlers
	var calls atomic.Int32
	_, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		if calls.Add(1) == 1 {
			close(firstRunning)
			select {
			case <-second:
			case <-failed:
			}
			return nil
		}
		close(second)
		return nil
	}, event.FromEarliest(), event.WithConcurrency(2))
	require.NoError(t, err)
	_, err = b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	<-firstRunning
	_, err = b.Publish(ctx, "t", []byte(`2`))
	require.NoError(t, err)
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second record waited for the first one's handler, with Concurrency 2")
	}
	require.Eventually(t, func() bool {
		st := b.Stats()
		return len(st) == 1 && st[0].Committed == 2
	}, 10*time.Second, time.Millisecond, "both settled")
}

// hookClock is a fake clock that runs a hook inside the next reading by
// a handler goroutine as its handler returns, and gives that reading the
// time from before the hook: the goroutine read the clock, then stalled
// (preempted on a loaded machine, or waiting for the group's lock to
// settle its delivery) while time moved on.
type hookClock struct {
	*clock.Fake
	hook  atomic.Pointer[func()]
	fired atomic.Bool
}

func (c *hookClock) Now() time.Time {
	t := c.Fake.Now()
	if pc, _, _, ok := runtime.Caller(1); ok && strings.HasSuffix(runtime.FuncForPC(pc).Name(), ".(*Subscription).handle") {
		if h := c.hook.Swap(nil); h != nil {
			(*h)()
			c.fired.Store(true)
		}
	}
	return t
}

// A delivery that waited in its subscription's queue past its lease
// while no handler started, and that the group took back for that, is
// skipped by the handler goroutine that finds it afterwards, however long
// ago that goroutine last read the clock: it is no longer its delivery
// (the group delivers it again, with the same attempt number, as it was
// never started). Here the goroutine reads the time its first handler
// returned, and the second record's lease runs out and is taken back
// before it goes on.
func TestHandlerGoroutineSkipsADeliveryTakenBack(t *testing.T) {
	t.Parallel()
	fk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	clk := &hookClock{Fake: fk}
	b, err := event.NewBus(event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}), event.Config{Clock: clk})
	require.NoError(t, err)
	ctx := context.Background()
	t.Cleanup(func() { require.NoError(t, b.Close(ctx)) })
	const ackTimeout = time.Second
	first, err := b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	second, err := b.Publish(ctx, "t", []byte(`2`))
	require.NoError(t, err)
	takenBack := func() {
		fk.Advance(ackTimeout) // the second record waited its whole lease
		assert.Eventually(t, func() bool {
			for _, st := range b.Deliveries("t", "g") {
				if st.ID == second.ID && st.State == "retry" {
					return true
				}
			}
			return false
		}, 10*time.Second, time.Millisecond, "the group takes the second record back, unstarted")
	}
	var mu sync.Mutex
	var seen []event.DeliveryContext // of the second record, as handlers got it
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		if d.ID == first.ID {
			require.NoError(t, d.ModAck(ctx, time.Hour)) // its own lease outlives the test
			clk.hook.Store(&takenBack)
			return nil
		}
		mu.Lock()
		seen = append(seen, d.DeliveryContext)
		mu.Unlock()
		return nil
	}, event.FromEarliest(), event.WithAckTimeout(ackTimeout), event.WithConcurrency(1))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return clk.fired.Load() && len(seen) > 0 && len(b.Deliveries("t", "g")) == 0
	}, 10*time.Second, time.Millisecond, "the first handler returned past the second record's lease, and both settled")
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, seen, 1, "the second record reached a handler once: the delivery taken back was skipped (got %+v)", seen)
}
