package event_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// lagClock is a fake clock that moves while a group's run loop or timer
// call arms its timer, once: as when the goroutine driving the clock advances it after
// the loop read the clock and before the loop's timer is armed (the
// loop's goroutine was descheduled in between, on a loaded machine). A
// timer armed for a time of the clock still fires at that time; one armed
// for a duration computed from the earlier reading fires late by the lag.
type lagClock struct {
	*clock.Fake

	mu    sync.Mutex
	loop  string         // the group loop whose next arm lags: "run" or "timers" (the timer's call)
	lag   time.Duration  // 0: no lag pending
	from  time.Time      // the lag applies from this time of the clock on
	armed chan time.Time // the clock's time once the lagging arm is done
	// runArms gets each time the run loop arms its timer for, when it
	// has room (a test that waits for an arm reads it).
	runArms chan time.Time
}

func newLagClock(start time.Time) *lagClock {
	return &lagClock{Fake: clock.NewFake(start), armed: make(chan time.Time, 1), runArms: make(chan time.Time, 16)}
}

// lagNext makes the next arm of loop's timer, once the clock reads from or
// later, move the clock by lag first.
func (c *lagClock) lagNext(loop string, from time.Time, lag time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loop, c.from, c.lag = loop, from, lag
}

func (c *lagClock) NewTimer(d time.Duration) clock.Timer {
	return &lagTimer{Timer: c.Fake.NewTimer(d), c: c}
}

func (c *lagClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return &lagTimer{Timer: c.Fake.AfterFunc(d, f), c: c}
}

// lagging moves the clock if the caller is the loop whose arm lags, and
// reports whether it did.
func (c *lagClock) lagging() bool {
	c.mu.Lock()
	lag, loop := c.lag, c.loop
	if lag == 0 || c.Fake.Now().Before(c.from) || groupLoop() != loop {
		c.mu.Unlock()
		return false
	}
	c.lag = 0
	c.mu.Unlock()
	c.Fake.Advance(lag)
	return true
}

// groupLoop names the group method (the run loop, the timer's call
// timers) the calling goroutine is in, innermost first, or "".
func groupLoop() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	const prefix = "github.com/promethean/promlib/event.(*group)."
	for {
		f, more := frames.Next()
		if name, ok := strings.CutPrefix(f.Function, prefix); ok {
			return name
		}
		if !more {
			return ""
		}
	}
}

type lagTimer struct {
	clock.Timer
	c *lagClock
}

func (t *lagTimer) Reset(d time.Duration) bool {
	lagged := t.c.lagging()
	was := t.Timer.Reset(d)
	if lagged {
		t.c.armed <- t.c.Fake.Now()
	}
	return was
}

// ResetAt arms the fake timer for a time of the clock (clock.ResetAt).
func (t *lagTimer) ResetAt(at time.Time) bool {
	lagged := t.c.lagging()
	was := t.Timer.(interface{ ResetAt(time.Time) bool }).ResetAt(at)
	if lagged {
		t.c.armed <- t.c.Fake.Now()
	}
	if groupLoop() == "run" {
		select {
		case t.c.runArms <- at:
		default:
		}
	}
	return was
}

// heartbeats records the fake time of each heartbeat of a member.
type heartbeats struct {
	event.LeaseStore
	clk *clock.Fake
	at  chan time.Time
}

func (h *heartbeats) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	h.at <- h.clk.Now()
	return h.LeaseStore.Heartbeat(ctx, topic, group, member, ttl)
}

func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		panic("unreachable")
	}
}

// A member renews its membership and leases every LeaseTTL/3 of its
// clock even when the clock moves while the group's loop arms its timer
// for the next renewal: the renewal is due at a time of the clock, not
// after a duration from a reading of it that is stale by then. (Armed by
// duration, the renewal came as late as the clock had moved: in the group
// protocol simulation the clock then waited for a renewal that waited for
// the clock, and the member's membership ran out.)
func TestGroupRenewsOnTimeWhenTheClockMovesAsItArmsItsTimer(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newLagClock(t0)
	st := event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk.Fake})
	hb := &heartbeats{LeaseStore: st, clk: clk.Fake, at: make(chan time.Time, 64)}
	const ttl = 3 * time.Second
	b, err := event.NewBus(st, event.Config{Clock: clk, Leases: hb, LeaseTTL: ttl, Partitions: 1})
	require.NoError(t, err)
	ctx := context.Background()
	defer func() { assert.NoError(t, b.Close(ctx)) }()
	_, err = b.Subscribe(ctx, "t", "g", func(context.Context, *event.Delivery) error { return nil })
	require.NoError(t, err)
	require.Equal(t, t0, recv(t, hb.at, "first heartbeat"))
	// The loop's turns after the first heartbeat end before the clock
	// moves: the loop arms its timer for the renewal at t0+ttl/3.
	for at := recv(t, clk.runArms, "the run loop's arm"); !at.Equal(t0.Add(ttl / 3)); {
		at = recv(t, clk.runArms, "the run loop's arm for t0+ttl/3")
	}

	// The renewal after the one at t0+ttl/3 arms its timer for the next
	// as the clock moves 900ms.
	clk.lagNext("run", t0.Add(ttl/3), 900*time.Millisecond)
	clk.Set(t0.Add(ttl / 3))
	h2 := recv(t, hb.at, "renewal at ttl/3")
	require.False(t, h2.Before(t0.Add(ttl/3)))
	require.Equal(t, h2.Add(900*time.Millisecond), recv(t, clk.armed, "the run loop's arm"))

	due := h2.Add(ttl / 3)
	clk.Set(due)
	select {
	case at := <-hb.at:
		assert.Equal(t, due, at, "renewed at another time than ttl/3 after the last renewal")
	case <-time.After(5 * time.Second):
		t.Fatalf("no renewal at %v, ttl/3 after the one at %v: the run loop's timer was armed late by the time the clock moved as it armed it",
			due.Format("15:04:05.000"), h2.Format("15:04:05.000"))
	}
}

// A delivery's lease ends at its deadline even when the clock moves while
// the group's timer call arms the timer for that deadline.
func TestLeaseEndsOnTimeWhenTheClockMovesAsItsTimerIsArmed(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newLagClock(t0)
	st := event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk.Fake})
	expired := make(chan time.Time, 8)
	b, err := event.NewBus(st, event.Config{Clock: clk, Partitions: 1, LeaseTTL: time.Minute,
		Observer: expiryObserver{clk: clk.Fake, at: expired}})
	require.NoError(t, err)
	ctx := context.Background()
	defer func() { assert.NoError(t, b.Close(ctx)) }()
	got := make(chan *event.Delivery, 1)
	_, err = b.Subscribe(ctx, "t", "g", func(_ context.Context, d *event.Delivery) error {
		got <- d
		return nil // never acked: the subscription acks by hand
	}, event.WithManualAck(), event.WithAckTimeout(2*time.Second))
	require.NoError(t, err)
	_, err = b.Publish(ctx, "t", []byte(`{}`))
	require.NoError(t, err)
	d := recv(t, got, "delivery")
	require.Equal(t, t0, clk.Now())
	// The lease ends at t0+3s. The timer fires at t0+2s (the end it was
	// armed for before the extension) and its call arms it for t0+3s as
	// the clock moves 500ms.
	require.NoError(t, d.ModAck(ctx, 3*time.Second))
	clk.lagNext("timers", t0.Add(2*time.Second), 500*time.Millisecond)
	clk.Set(t0.Add(2 * time.Second))
	recv(t, clk.armed, "the timer call's arm")

	end := t0.Add(3 * time.Second)
	clk.Set(end)
	select {
	case at := <-expired:
		assert.Equal(t, end, at)
	case <-time.After(5 * time.Second):
		t.Fatalf("the lease ending at %v did not end then: the timer was armed late by the time the clock moved as it was armed",
			end.Format("15:04:05.000"))
	}
}

type expiryObserver struct {
	event.NopObserver
	clk *clock.Fake
	at  chan time.Time
}

func (o expiryObserver) Expired(string, string) { o.at <- o.clk.Now() }
