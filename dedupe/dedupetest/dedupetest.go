package dedupe_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testmongo"
)

func TestMain(m *testing.M) { testmongo.Main(m) }

// storeFactories lists the stores every test runs against.
var storeFactories = map[string]func(t *testing.T) dedupe.Store{
	"memory": func(t *testing.T) dedupe.Store { return dedupe.NewMemoryStore() },
	"mongo":  func(t *testing.T) dedupe.Store { return newMongoStore(t) },
}

func newMongoStore(t *testing.T) *dedupe.MongoStore {
	s, err := dedupe.NewMongoStore(testmongo.DB(t), "")
	require.NoError(t, err)
	_, err = s.EnsureIndexes(context.Background())
	require.NoError(t, err)
	return s
}

// forEachStore runs fn against every store; the Mongo one not in parallel,
// since the bundled test server runs one command at a time anyway.
func forEachStore(t *testing.T, fn func(t *testing.T, s dedupe.Store)) {
	for name, f := range storeFactories {
		t.Run(name, func(t *testing.T) {
			if name == "memory" {
				t.Parallel()
			}
			fn(t, f(t))
		})
	}
}

// scale returns n for the memory store and less for a server store.
func scale(t *testing.T, n int) int {
	if strings.HasSuffix(t.Name(), "/memory") {
		return n
	}
	return n / 20
}

func TestStoreClaims(t *testing.T) {
	forEachStore(t, func(t *testing.T, s dedupe.Store) {
		ctx := context.Background()
		st, err := s.Claim(ctx, "k", "a", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, dedupe.Acquired, st)
		st, err = s.Claim(ctx, "k", "b", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, dedupe.Busy, st, "a live claim is exclusive")
		assert.ErrorIs(t, s.Complete(ctx, "k", "b", time.Minute), dedupe.ErrNotOwner)
		require.NoError(t, s.Release(ctx, "k", "b"), "releasing another's claim is a no-op")
		st, err = s.Claim(ctx, "k", "b", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, dedupe.Busy, st)
		require.NoError(t, s.Release(ctx, "k", "a"))
		st, err = s.Claim(ctx, "k", "b", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, dedupe.Acquired, st, "a released key is free")
		seen, err := s.Seen(ctx, "k")
		require.NoError(t, err)
		assert.False(t, seen)
		require.NoError(t, s.Complete(ctx, "k", "b", time.Minute))
		seen, err = s.Seen(ctx, "k")
		require.NoError(t, err)
		assert.True(t, seen)
		st, err = s.Claim(ctx, "k", "c", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, dedupe.Done, st)

		_, err = s.Claim(ctx, "", "a", time.Minute)
		assert.ErrorIs(t, err, dedupe.ErrInvalid)
		_, err = s.Claim(ctx, "k2", "", time.Minute)
		assert.ErrorIs(t, err, dedupe.ErrInvalid)
	})
}

func TestExpiredKeysAreNotSeen(t *testing.T) {
	forEachStore(t, func(t *testing.T, s dedupe.Store) {
		ctx := context.Background()
		st, err := s.Claim(ctx, "short", "a", 50*time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, dedupe.Acquired, st)
		require.Eventually(t, func() bool {
			st, err := s.Claim(ctx, "short", "b", time.Minute)
			return err == nil && st == dedupe.Acquired
		}, 10*time.Second, 5*time.Millisecond, "an expired claim is taken over")
		require.NoError(t, s.Complete(ctx, "short", "b", 50*time.Millisecond))
		require.Eventually(t, func() bool {
			seen, err := s.Seen(ctx, "short")
			return err == nil && !seen
		}, 10*time.Second, 5*time.Millisecond, "an expired done key is not seen")
		n, err := s.Reap(ctx)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, n, 1)
	})
}

func TestSubscribeExactlyOnceRefusesShortTTL(t *testing.T) {
	t.Parallel()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(context.Background())
	h := func(context.Context, *event.Delivery) error { return nil }
	_, err = dedupe.SubscribeExactlyOnce(context.Background(), bus, "t", "g", dedupe.NewMemoryStore(), h, dedupe.Options{
		TTL:       time.Minute,
		Subscribe: []event.SubscribeOption{event.WithAckTimeout(time.Minute), event.WithMaxAttempts(3)},
	})
	assert.ErrorIs(t, err, dedupe.ErrInvalid)
	assert.ErrorContains(t, err, "TTL")
	_, err = dedupe.SubscribeExactlyOnce(context.Background(), bus, "t", "g", dedupe.NewMemoryStore(), h, dedupe.Options{
		Subscribe: []event.SubscribeOption{event.WithManualAck()},
	})
	assert.ErrorContains(t, err, "manual ack")
	_, err = dedupe.SubscribeExactlyOnce(context.Background(), bus, "t", "g", nil, h, dedupe.Options{})
	assert.ErrorContains(t, err, "store")
}

// 10,000 events, three concurrent subscribers, some handlers slower
// than the ack timeout (so the bus redelivers them to another subscriber
// while they still run), then the group rewound by 10% to force those
// redeliveries again: the side effect happens exactly once per id.
func TestSubscribeExactlyOnceUnderRedelivery(t *testing.T) {
	forEachStore(t, func(t *testing.T, s dedupe.Store) {
		ctx := context.Background()
		es := event.NewMemoryStore()
		bus, err := event.NewBus(es, event.Config{})
		require.NoError(t, err)
		defer bus.Close(ctx)
		n := scale(t, 10000)
		// A server store answers in milliseconds, not microseconds: give
		// its leases room for the renewals to land.
		ackTimeout := 200 * time.Millisecond
		if n < 10000 {
			ackTimeout = time.Second
		}
		var mu sync.Mutex
		effects := make(map[string]int, n)
		var runs atomic.Int64
		h := func(ctx context.Context, d *event.Delivery) error {
			runs.Add(1)
			i, _ := strconv.Atoi(string(d.Payload))
			if i%250 == 0 && d.Attempt == 1 {
				time.Sleep(ackTimeout * 3 / 2) // past the ack timeout
			}
			mu.Lock()
			effects[d.ID]++
			mu.Unlock()
			return nil
		}
		opts := dedupe.Options{Subscribe: []event.SubscribeOption{
			event.FromEarliest(), event.WithAckTimeout(ackTimeout), event.WithConcurrency(4),
			event.WithBackoff(time.Millisecond, 10*time.Millisecond), event.WithMaxAttempts(20),
		}}
		var subs []*event.Subscription
		for range 3 {
			sub, err := dedupe.SubscribeExactlyOnce(ctx, bus, "t", "g", s, h, opts)
			require.NoError(t, err)
			subs = append(subs, sub)
		}
		for i := range n {
			_, err := bus.Publish(ctx, "t", []byte(strconv.Itoa(i)))
			require.NoError(t, err)
		}
		waitCursor := func(want int) {
			require.Eventually(t, func() bool {
				c, err := bus.Cursor(ctx, "t", "g")
				return err == nil && c.Seq == uint64(want)
			}, 60*time.Second, 10*time.Millisecond)
		}
		waitCursor(n)
		for _, sub := range subs {
			require.NoError(t, sub.Close())
		}
		// Rewind by 10%: those events are delivered again.
		require.NoError(t, bus.SetCursor(ctx, "t", "g", uint64(n-n/10)))
		before := runs.Load()
		sub, err := dedupe.SubscribeExactlyOnce(ctx, bus, "t", "g", s, h, opts)
		require.NoError(t, err)
		waitCursor(n)
		require.NoError(t, sub.Close())
		assert.Equal(t, before, runs.Load(), "redelivered ids do not run the handler again")

		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, n, len(effects), "every id had its effect")
		for id, c := range effects {
			require.Equal(t, 1, c, "id %s had its effect %d times", id, c)
		}
	})
}

func TestFailedHandlerReleasesClaim(t *testing.T) {
	forEachStore(t, func(t *testing.T, s dedupe.Store) {
		ctx := context.Background()
		bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
		require.NoError(t, err)
		defer bus.Close(ctx)
		var calls atomic.Int32
		done := make(chan int, 1)
		_, err = dedupe.SubscribeExactlyOnce(ctx, bus, "t", "g", s, func(ctx context.Context, d *event.Delivery) error {
			if calls.Add(1) == 1 {
				return assert.AnError
			}
			done <- d.Attempt
			return nil
		}, dedupe.Options{Subscribe: []event.SubscribeOption{event.FromEarliest(), event.WithBackoff(time.Millisecond, time.Millisecond)}})
		require.NoError(t, err)
		r, err := bus.Publish(ctx, "t", []byte(`1`))
		require.NoError(t, err)
		assert.Equal(t, 2, <-done, "the redelivery runs the handler")
		require.Eventually(t, func() bool {
			seen, err := s.Seen(ctx, dedupe.Key("t", "g", r.ID))
			return err == nil && seen
		}, 10*time.Second, 5*time.Millisecond)
	})
}

// Two deliveries of one id arriving at once (as after a lease expiry):
// the handler runs once, never concurrently, and the second delivery
// waits for the first instead of failing.
func TestWrapRunsOneDeliveryAtATime(t *testing.T) {
	forEachStore(t, func(t *testing.T, s dedupe.Store) {
		var running, maxRunning, effects atomic.Int32
		h, err := dedupe.Wrap("t", "g", s, func(ctx context.Context, d *event.Delivery) error {
			n := running.Add(1)
			for {
				m := maxRunning.Load()
				if n <= m || maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(100 * time.Millisecond)
			effects.Add(1)
			running.Add(-1)
			return nil
		}, dedupe.Options{Subscribe: []event.SubscribeOption{event.WithAckTimeout(100 * time.Millisecond)}})
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := &event.Delivery{Record: event.Record{ID: "same", Topic: "t"}}
				d.Attempt = i + 1
				d.Deadline = time.Now().Add(100 * time.Millisecond)
				errs[i] = h(context.Background(), d)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			assert.NoError(t, err)
		}
		assert.Equal(t, int32(1), maxRunning.Load(), "never two at once")
		assert.Equal(t, int32(1), effects.Load(), "the effect happened once")
	})
}
