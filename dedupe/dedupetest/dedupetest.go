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
	// its leases room for the renewals to land, and let the deliveries
	// waiting for a busy id poll it less often. On a server that runs one
	// command at a time per database (the bundled test server), twelve
	// waiters polling every 20 ms queue more work than it does, and the
	// holder's claim renewal waits behind them past the claim's lease:
	// then a second run is what the dedupe contract allows (a holder that
	// cannot renew is taken for dead), not what this test is about.
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
	require.NoError(t, bus.SetCursor(ctx, "t", "g", uint64(n-n/10)))
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

// Two deliveries of one id at once, made on purpose: a handler holds
// its event past the ack timeout, which the test moves on the bus's fake
// clock (the wrapper's lease renewals run on the wall clock, minutes
// away), so the bus delivers the event again while the first delivery
// runs. The redelivery finds the id busy and waits for the holder instead
// of running the handler, then finds it done. Other events fail their
// first attempt and run again. Every id has its effect once.
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

	cs := &countingStore{Store: s, claims: make(map[string]int), busy: make(map[string]int)}
	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	defer letGo() // before the bus closes, which waits for the handlers
	var holding atomic.Int32
	var mu sync.Mutex
	effects := make(map[string]int, n)
	runs := make(map[string]int, n)
	var heldIDs []string
	h := func(ctx context.Context, d *event.Delivery) error {
		i, _ := strconv.Atoi(string(d.Payload))
		mu.Lock()
		runs[d.ID]++
		mu.Unlock()
		switch {
		case i%heldEvery == 0 && d.Attempt == 1:
			mu.Lock()
			heldIDs = append(heldIDs, d.ID)
			mu.Unlock()
			holding.Add(1)
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
	// Each subscription has room for its held events, their redeliveries
	// waiting beside them, and the others.
	opts := dedupe.Options{PollInterval: poll, Clock: clock.System(), Subscribe: []event.SubscribeOption{
		event.FromEarliest(), event.WithAckTimeout(ackTimeout), event.WithConcurrency(2*held + 2),
		event.WithBackoff(time.Millisecond, time.Millisecond), event.WithMaxAttempts(5),
	}}
	for range 3 {
		_, err := dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{Bus: bus, Topic: "t", Group: "g", Store: cs, Handler: h, Options: opts})
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
	require.Eventually(t, func() bool { return settledBut(held) && holding.Load() == held },
		60*time.Second, time.Millisecond, "all but the held events settled, the held ones in their handlers")

	clk.Advance(ackTimeout) // the held deliveries' leases end while their handlers run
	require.Eventually(t, func() bool {
		clk.Advance(time.Millisecond) // through the redelivery backoff
		mu.Lock()
		defer mu.Unlock()
		for _, id := range heldIDs {
			if cs.busyOf(dedupe.Key("t", "g", id)) == 0 {
				return false
			}
		}
		return true
	}, 60*time.Second, time.Millisecond, "each held event's redelivery found it busy")
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

// countingStore counts the claims of each key, and those that found it
// busy.
type countingStore struct {
	dedupe.Store
	mu     sync.Mutex
	claims map[string]int
	busy   map[string]int
}

func (s *countingStore) Claim(ctx context.Context, key, owner string, lease time.Duration) (dedupe.State, error) {
	st, err := s.Store.Claim(ctx, key, owner, lease)
	s.mu.Lock()
	s.claims[key]++
	if err == nil && st == dedupe.Busy {
		s.busy[key]++
	}
	s.mu.Unlock()
	return st, err
}

func (s *countingStore) claimsOf(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims[key]
}

func (s *countingStore) busyOf(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy[key]
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
// handler runs once. The first holds the id until the second has tried to
// claim it.
func testWrapTellsDeliveriesOfOneAttemptApart(t *testing.T, s dedupe.Store, _ func(int) int) {
	cs := &countingStore{Store: s, claims: make(map[string]int), busy: make(map[string]int)}
	var effects atomic.Int32
	first := make(chan struct{})
	h, err := dedupe.Wrap(dedupe.Config{
		Topic: "t", Group: "g", Store: cs,
		Handler: func(ctx context.Context, d *event.Delivery) error {
			if effects.Add(1) == 1 {
				close(first)
				assert.Eventually(t, func() bool { return cs.claimsOf(dedupe.Key("t", "g", "same")) >= 2 },
					10*time.Second, time.Millisecond, "the second delivery tries to claim the id")
			}
			return nil
		},
		// Renewals every 20s, none in the test: the claims counted are
		// the deliveries'.
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{event.WithAckTimeout(time.Minute)}},
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
	for range 2 {
		assert.NoError(t, <-errs)
	}
	assert.Equal(t, int32(1), effects.Load(), "the effect happened once")
}
