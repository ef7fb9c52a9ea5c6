package dedupetest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
)

// Factory returns a new, empty store. It may register cleanups on t.
type Factory func(t *testing.T) dedupe.Store

// ClockedFactory returns a new, empty store that tells the time of claims
// and expiries by clk.
type ClockedFactory func(t *testing.T, clk clock.Clock) dedupe.Store

// Options tune the suite to a store.
type Options struct {
	// Server says the store is backed by a database server: the tests run
	// one at a time and with a fiftieth of the events (200 of 10,000:
	// every event costs three round trips, which the bundled test server
	// runs one at a time per database, some 15 ms each under the race
	// detector on a loaded machine).
	Server bool
	// Fewer runs the tests with a twentieth of the events, in parallel:
	// for a store that is slow where it runs (SQLite in Go under the race
	// detector), or whose every call is a round trip to a server, where
	// 10,000 events take many seconds.
	Fewer bool
	// Clocked makes stores on a fake clock, for the tests that move the
	// time past a claim's lease; without it they are skipped.
	Clocked ClockedFactory
}

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore Factory, opts Options) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s dedupe.Store, scale func(int) int)
	}{
		{"StoreClaims", testStoreClaims},
		{"ExpiredKeysAreNotSeen", testExpiredKeysAreNotSeen},
		{"SubscribeExactlyOnceUnderRedelivery", testSubscribeExactlyOnceUnderRedelivery},
		{"ConcurrentRedeliveryWaitsForTheHolder", testConcurrentRedeliveryWaitsForTheHolder},
		{"FailedHandlerReleasesClaim", testFailedHandlerReleasesClaim},
		{"WrapRunsOneDeliveryAtATime", testWrapRunsOneDeliveryAtATime},
		{"WrapTellsDeliveriesOfOneAttemptApart", testWrapTellsDeliveriesOfOneAttemptApart},
	}
	scale := func(n int) int { return n }
	switch {
	case opts.Server:
		scale = func(n int) int { return n / 50 }
	case opts.Fewer:
		scale = func(n int) int { return n / 20 }
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !opts.Server {
				t.Parallel()
			}
			tc.fn(t, newStore(t), scale)
		})
	}
	clocked := []struct {
		name string
		fn   func(t *testing.T, newStore func(clock.Clock) dedupe.Store)
	}{
		{"CompleteAfterTheClaimExpired", testCompleteAfterTheClaimExpired},
		{"HolderOutlivesItsClaim", testHolderOutlivesItsClaim},
		{"StalledHolderKeepsTheIdInItsProcess", testStalledHolderKeepsTheIdInItsProcess},
	}
	for _, tc := range clocked {
		t.Run(tc.name, func(t *testing.T) {
			if opts.Clocked == nil {
				t.Skip("no Options.Clocked")
			}
			if !opts.Server {
				t.Parallel()
			}
			tc.fn(t, func(c clock.Clock) dedupe.Store { return opts.Clocked(t, c) })
		})
	}
}

func testStoreClaims(t *testing.T, s dedupe.Store, _ func(int) int) {
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
}

func testExpiredKeysAreNotSeen(t *testing.T, s dedupe.Store, _ func(int) int) {
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
}

// 10,000 events, three concurrent subscribers, some handlers slower
// than the ack timeout (the wrapper extends their leases; a renewal that
// comes late, on a loaded machine, lets the bus deliver the event again
// while the handler runs), then the group rewound by 10% to force
// redeliveries again: the side effect happens exactly once per id. With
// fewer events, one in 250 is still slow, and at least two are. On a
// quiet machine nothing is redelivered before the rewind; the
// redeliveries during a handler are forced, on every store, by
// ConcurrentRedeliveryWaitsForTheHolder.
func testSubscribeExactlyOnceUnderRedelivery(t *testing.T, s dedupe.Store, scale func(int) int) {
	ctx := context.Background()
	es := event.NewMemoryStore()
	bus, err := event.NewBus(es, event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	n := scale(10000)
	// A server store answers in milliseconds, not microseconds: give
	// its leases room for the renewals and marks to land, and let the
	// deliveries waiting for a busy id look again less often. (They wait
	// in this process: the subscriptions here share the store value, and
	// only the holder's renewals and marks go to the server, which the
	// bundled test server runs one command at a time per database.)
	ackTimeout := 200 * time.Millisecond
	var poll time.Duration // the default
	if n < 10000 {
		ackTimeout, poll = 2*time.Second, 250*time.Millisecond
	}
	slowEvery := min(250, n/2)
	var mu sync.Mutex
	effects := make(map[string]int, n)
	var runs atomic.Int64
	h := func(ctx context.Context, d *event.Delivery) error {
		runs.Add(1)
		i, _ := strconv.Atoi(string(d.Payload))
		if i%slowEvery == 0 && d.Attempt == 1 {
			time.Sleep(ackTimeout * 3 / 2) // past the ack timeout
		}
		mu.Lock()
		effects[d.ID]++
		mu.Unlock()
		return nil
	}
	opts := dedupe.Options{PollInterval: poll, Subscribe: []event.SubscribeOption{
		event.FromEarliest(), event.WithAckTimeout(ackTimeout), event.WithConcurrency(4),
		event.WithBackoff(time.Millisecond, 10*time.Millisecond), event.WithMaxAttempts(20),
	}}
	var subs []*event.Subscription
	for range 3 {
		sub, err := dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{Bus: bus, Topic: "t", Group: "g", Store: s, Handler: h, Options: opts})
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
	_, err = bus.ResetCursor(ctx, "t", "g", event.AtSeq(uint64(n-n/10)+1), false)
	require.NoError(t, err)
	before := runs.Load()
	sub, err := dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{Bus: bus, Topic: "t", Group: "g", Store: s, Handler: h, Options: opts})
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
}

// Two deliveries of one id at once, made on purpose, in two subscribers
// that share the store as two processes would (each with a store value of
// its own, so that only the store's claims keep them apart): a handler
// holds its event past the ack timeout, which the test moves on the bus's
// fake clock (the wrapper's lease renewals run on the wall clock, minutes
// away), and the holder's subscriber is paused, so the bus delivers the
// event again to another one while the first delivery runs. The
// redelivery finds the id busy in the store and waits for the holder
// instead of running the handler, then finds it done. Other events fail
// their first attempt and run again. Every id has its effect once.
func testConcurrentRedeliveryWaitsForTheHolder(t *testing.T, s dedupe.Store, scale func(int) int) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	bus, err := event.NewBus(event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}), event.Config{Clock: clk})
	require.NoError(t, err)
	defer bus.Close(ctx)
	const (
		ackTimeout = 10 * time.Minute // on clk; the renewals, every third of it, on the wall clock
		held       = 4                // events whose first delivery holds them past the ack timeout
	)
	n := max(scale(400), 24)
	poll := 5 * time.Millisecond
	if scale(10000) < 10000 {
		poll = 50 * time.Millisecond // a server store: fewer polls queued before the holders' writes
	}
	heldEvery, failEvery := n/held, 5

	counts := newClaimCounts()
	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	defer letGo() // before the bus closes, which waits for the handlers
	var mu sync.Mutex
	effects := make(map[string]int, n)
	runs := make(map[string]int, n)
	var heldIDs []string
	holders := make(map[int]bool) // the subscribers holding events
	handler := func(sub int) event.Handler {
		return func(ctx context.Context, d *event.Delivery) error {
			i, _ := strconv.Atoi(string(d.Payload))
			mu.Lock()
			runs[d.ID]++
			mu.Unlock()
			switch {
			case i%heldEvery == 0 && d.Attempt == 1:
				mu.Lock()
				heldIDs = append(heldIDs, d.ID)
				holders[sub] = true
				mu.Unlock()
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			case i%failEvery == 1 && d.Attempt == 1:
				return errors.New("dedupetest: first attempt fails")
			}
			mu.Lock()
			effects[d.ID]++
			mu.Unlock()
			return nil
		}
	}
	// Each subscription has room for its held events, the redeliveries
	// waiting beside them, and the others.
	opts := dedupe.Options{PollInterval: poll, Clock: clock.System(), Subscribe: []event.SubscribeOption{
		event.FromEarliest(), event.WithAckTimeout(ackTimeout), event.WithConcurrency(2*held + 2),
		event.WithBackoff(time.Millisecond, time.Millisecond), event.WithMaxAttempts(5),
	}}
	subs := make([]*event.Subscription, 3)
	for i := range subs {
		subs[i], err = dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{Bus: bus, Topic: "t", Group: "g",
			Store: &countingStore{Store: s, counts: counts}, Handler: handler(i), Options: opts})
		require.NoError(t, err)
	}
	for i := range n {
		_, err := bus.Publish(ctx, "t", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	settledBut := func(want int) bool {
		clk.Advance(time.Millisecond) // through the backoffs of the failed attempts
		mu.Lock()
		defer mu.Unlock()
		return len(effects) == n-want && len(bus.Deliveries("t", "g")) == want
	}
	require.Eventually(t, func() bool {
		if !settledBut(held) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		return len(heldIDs) == held
	}, 60*time.Second, time.Millisecond, "all but the held events settled, the held ones in their handlers")

	mu.Lock()
	for i := range holders {
		subs[i].Pause() // its partition goes to another subscriber
	}
	require.Less(t, len(holders), len(subs), "a subscriber holds no event")
	mu.Unlock()
	clk.Advance(ackTimeout) // the held deliveries' leases end while their handlers run
	require.Eventually(t, func() bool {
		clk.Advance(time.Millisecond) // through the redelivery backoff
		mu.Lock()
		defer mu.Unlock()
		for _, id := range heldIDs {
			if counts.busyOf(dedupe.Key("t", "g", id)) == 0 {
				return false
			}
		}
		return true
	}, 60*time.Second, time.Millisecond, "each held event's redelivery found it busy in the store")
	letGo()
	require.Eventually(t, func() bool { return settledBut(0) }, 60*time.Second, time.Millisecond, "every event settled")

	mu.Lock()
	defer mu.Unlock()
	for id, c := range effects {
		require.Equal(t, 1, c, "id %s had its effect %d times", id, c)
	}
	for _, id := range heldIDs {
		assert.Equal(t, 1, runs[id], "the redelivery of held id %s waited, and did not run the handler", id)
	}
	assert.Greater(t, len(runs), held, "events besides the held ones")
}

// claimCounts counts the claims of each key, and those that found it
// busy.
type claimCounts struct {
	mu     sync.Mutex
	claims map[string]int
	busy   map[string]int
}

func newClaimCounts() *claimCounts {
	return &claimCounts{claims: make(map[string]int), busy: make(map[string]int)}
}

func (c *claimCounts) busyOf(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy[key]
}

// countingStore counts its claims in counts. Each one is a store value of
// its own over the same store, as another process's would be.
type countingStore struct {
	dedupe.Store
	counts *claimCounts
}

func (s *countingStore) Claim(ctx context.Context, key, owner string, lease time.Duration) (dedupe.State, error) {
	st, err := s.Store.Claim(ctx, key, owner, lease)
	s.counts.mu.Lock()
	s.counts.claims[key]++
	if err == nil && st == dedupe.Busy {
		s.counts.busy[key]++
	}
	s.counts.mu.Unlock()
	return st, err
}

// A claim that expired is still its owner's until another owner takes
// it: Complete marks it done, whether the expired claim was deleted yet
// or not, and refuses only a key another owner holds or one that is done.
func testCompleteAfterTheClaimExpired(t *testing.T, newStore func(clock.Clock) dedupe.Store) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(clk)
	for _, k := range []string{"expired", "taken", "reaped"} {
		st, err := s.Claim(ctx, k, "a", time.Minute)
		require.NoError(t, err)
		require.Equal(t, dedupe.Acquired, st)
	}
	clk.Advance(2 * time.Minute)
	st, err := s.Claim(ctx, "taken", "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, dedupe.Acquired, st, "an expired claim is taken over")

	require.NoError(t, s.Complete(ctx, "expired", "a", time.Hour), "an expired claim nobody took is still a's")
	assert.ErrorIs(t, s.Complete(ctx, "taken", "a", time.Hour), dedupe.ErrNotOwner, "b took it over")
	require.NoError(t, s.Complete(ctx, "taken", "b", time.Hour))
	_, err = s.Reap(ctx)
	require.NoError(t, err) // reaped is deleted now, if the store's own sweep did not
	require.NoError(t, s.Complete(ctx, "reaped", "a", time.Hour), "a claim deleted after it expired, taken by nobody")
	for _, k := range []string{"expired", "taken", "reaped"} {
		seen, err := s.Seen(ctx, k)
		require.NoError(t, err)
		assert.True(t, seen, "%s is done", k)
		st, err := s.Claim(ctx, k, "c", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, dedupe.Done, st, "%s is done", k)
	}
	assert.ErrorIs(t, s.Complete(ctx, "expired", "a", time.Hour), dedupe.ErrNotOwner, "a done key")
}

// A holder whose claim ran out while its handler ran (its renewals came
// late: a starved goroutine, a slow store) and that no other delivery
// took still marks the id done, so the redelivery does not run the
// handler again. The store's clock passes the claim's lease while the
// handler runs; the wrapper's renewals run on a clock that stands still.
func testHolderOutlivesItsClaim(t *testing.T, newStore func(clock.Clock) dedupe.Store) {
	ctx := context.Background()
	storeClk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(storeClk)
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	var runs atomic.Int32
	sub, err := dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{
		Bus: bus, Topic: "t", Group: "g", Store: s,
		Handler: func(ctx context.Context, d *event.Delivery) error {
			if runs.Add(1) == 1 {
				storeClk.Advance(time.Hour) // far past the claim's lease (three ack timeouts)
			}
			return nil
		},
		Options: dedupe.Options{
			Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), // no renewal comes
			Subscribe: []event.SubscribeOption{
				event.FromEarliest(), event.WithAckTimeout(time.Minute), event.WithBackoff(time.Millisecond, time.Millisecond),
			},
		},
	})
	require.NoError(t, err)
	r, err := bus.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := bus.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == r.Seq
	}, 30*time.Second, 5*time.Millisecond, "the event settled")
	require.NoError(t, sub.Close())
	assert.Equal(t, int32(1), runs.Load(), "the handler ran once")
	seen, err := s.Seen(ctx, dedupe.Key("t", "g", r.ID))
	require.NoError(t, err)
	assert.True(t, seen, "the holder marked it done")
}

func testFailedHandlerReleasesClaim(t *testing.T, s dedupe.Store, _ func(int) int) {
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	var calls atomic.Int32
	done := make(chan int, 1)
	_, err = dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{
		Bus: bus, Topic: "t", Group: "g", Store: s,
		Handler: func(ctx context.Context, d *event.Delivery) error {
			if calls.Add(1) == 1 {
				return assert.AnError
			}
			done <- d.Attempt
			return nil
		},
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{event.FromEarliest(), event.WithBackoff(time.Millisecond, time.Millisecond)}},
	})
	require.NoError(t, err)
	r, err := bus.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	assert.Equal(t, 2, <-done, "the redelivery runs the handler")
	require.Eventually(t, func() bool {
		seen, err := s.Seen(ctx, dedupe.Key("t", "g", r.ID))
		return err == nil && seen
	}, 10*time.Second, 5*time.Millisecond)
}

// Two deliveries of one id arriving at once (as after a lease expiry):
// the handler runs once, never concurrently, and the second delivery
// waits for the first instead of failing.
func testWrapRunsOneDeliveryAtATime(t *testing.T, s dedupe.Store, _ func(int) int) {
	var running, maxRunning, effects atomic.Int32
	h, err := dedupe.Wrap(dedupe.Config{
		Topic: "t", Group: "g", Store: s,
		Handler: func(ctx context.Context, d *event.Delivery) error {
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
		},
		// The claim's lease (three ack timeouts) is far longer than the
		// handler's 100 ms, so only a broken claim lets a second run in,
		// not a renewal that a loaded server answered late.
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{event.WithAckTimeout(time.Second)}},
	})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &event.Delivery{Record: event.Record{ID: "same", Topic: "t"}}
			d.Attempt = i + 1
			d.Deadline = time.Now().Add(time.Second)
			errs[i] = h(context.Background(), d)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, int32(1), maxRunning.Load(), "never two at once")
	assert.Equal(t, int32(1), effects.Load(), "the effect happened once")
}

// Two deliveries of one id with the same attempt number at once, as two
// members of a group may hand a wrapped handler after one took a
// partition over from the other: they are two deliveries, and the
// handler runs once. The first holds the id until the second is in the
// wrapper, waiting: it has armed its lease renewals and a wait for the id
// on the wrapper's clock (a fake one, moved by the test afterwards), or
// it ran the handler.
func testWrapTellsDeliveriesOfOneAttemptApart(t *testing.T, s dedupe.Store, _ func(int) int) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var effects atomic.Int32
	first, second := make(chan struct{}), make(chan struct{})
	waiting := make(chan struct{})
	go func() {
		// The first call's renewals, the second's, and its wait for the id.
		if clk.WaitTimers(context.Background(), 3) == nil {
			close(waiting)
		}
	}()
	const poll = time.Millisecond
	h, err := dedupe.Wrap(dedupe.Config{
		Topic: "t", Group: "g", Store: s,
		Handler: func(ctx context.Context, d *event.Delivery) error {
			if effects.Add(1) == 1 {
				close(first)
				select {
				case <-waiting:
				case <-second:
				case <-time.After(10 * time.Second):
					t.Error("the second delivery neither waited nor ran")
				}
				return nil
			}
			close(second)
			return nil
		},
		Options: dedupe.Options{Clock: clk, PollInterval: poll, Subscribe: []event.SubscribeOption{event.WithAckTimeout(time.Minute)}},
	})
	require.NoError(t, err)
	errs := make(chan error, 2)
	run := func() {
		d := &event.Delivery{Record: event.Record{ID: "same", Topic: "t"}}
		d.Attempt = 1
		d.Deadline = time.Now().Add(time.Minute)
		errs <- h(context.Background(), d)
	}
	go run()
	<-first
	go run()
	assert.NoError(t, <-errs)
	require.Eventually(t, func() bool {
		select {
		case err := <-errs:
			assert.NoError(t, err)
			return true
		default:
			clk.Advance(poll) // the second delivery looks again
			return false
		}
	}, 10*time.Second, time.Millisecond, "the second delivery returned")
	assert.Equal(t, int32(1), effects.Load(), "the effect happened once")
}

// A holder whose process stalls past its claim's lease (the store's clock
// moves past it while the handler runs; the wrapper's renewals, on a clock
// that stands still, never come) keeps the id from another delivery of
// its own process, which waits instead of taking the expired claim over:
// the holder is alive, and the effect happens once. The second delivery
// comes through another wrapper of the same store, as a second
// subscription of the group would.
func testStalledHolderKeepsTheIdInItsProcess(t *testing.T, newStore func(clock.Clock) dedupe.Store) {
	storeClk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(storeClk)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var effects atomic.Int32
	first, second := make(chan struct{}), make(chan struct{})
	waiting := make(chan struct{})
	go func() {
		// The holder's renewals, the second delivery's, and its wait for
		// the id.
		if clk.WaitTimers(context.Background(), 3) == nil {
			close(waiting)
		}
	}()
	const poll = time.Millisecond
	cfg := dedupe.Config{
		Topic: "t", Group: "g", Store: s,
		Handler: func(ctx context.Context, d *event.Delivery) error {
			if effects.Add(1) == 1 {
				close(first)
				select {
				case <-waiting:
				case <-second:
				case <-time.After(10 * time.Second):
					t.Error("the second delivery neither waited nor ran")
				}
				return nil
			}
			close(second)
			return nil
		},
		Options: dedupe.Options{Clock: clk, PollInterval: poll, Subscribe: []event.SubscribeOption{event.WithAckTimeout(time.Minute)}},
	}
	h1, err := dedupe.Wrap(cfg)
	require.NoError(t, err)
	h2, err := dedupe.Wrap(cfg)
	require.NoError(t, err)
	errs := make(chan error, 2)
	run := func(h event.Handler, attempt int) {
		d := &event.Delivery{Record: event.Record{ID: "stalled", Topic: "t"}}
		d.Attempt = attempt
		d.Deadline = time.Now().Add(time.Minute)
		errs <- h(context.Background(), d)
	}
	go run(h1, 1)
	<-first
	storeClk.Advance(time.Hour) // far past the holder's claim (three ack timeouts)
	go run(h2, 2)
	assert.NoError(t, <-errs)
	require.Eventually(t, func() bool {
		select {
		case err := <-errs:
			assert.NoError(t, err)
			return true
		default:
			clk.Advance(poll) // the second delivery looks again
			return false
		}
	}, 10*time.Second, time.Millisecond, "the second delivery returned")
	assert.Equal(t, int32(1), effects.Load(), "the effect happened once")
	seen, err := s.Seen(context.Background(), dedupe.Key("t", "g", "stalled"))
	require.NoError(t, err)
	assert.True(t, seen)
}
