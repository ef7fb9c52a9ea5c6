package event

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
)

// The group's timer (rearm, timers, stopTimers), on a group with no
// subscription and no store: its call moves the backoffs that ended to
// the retry heap, as for a group that delivers, and arms the timer for
// the next end.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func timerGroup(clk clock.Clock) *group {
	g := &group{b: &Bus{clk: clk}, leases: newLeaseQueue()}
	g.retry.less = func(a, b *entry) bool { return a.d.Seq < b.d.Seq }
	g.waiting.less = func(a, b *entry) bool { return a.deadline.Before(b.deadline) }
	return g
}

// backoffUntil adds a record waiting until end, as a nack does, and tells
// the timer of it.
func backoffUntil(g *group, seq uint64, end time.Time) {
	e := &entry{hidx: -1, state: stWaiting, deadline: end}
	e.d.Seq = seq
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting.push(e)
	g.rearm(end)
}

// timerState is what the timer is armed for, and how many records wait
// and how many are due for a retry.
func timerState(g *group) (armed time.Time, waiting, retry int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.armed, len(g.waiting.items), len(g.retry.items)
}

// gateClock is a fake clock whose Now, when read by a call of timers
// while the gate is shut, waits until the test opens it: the call is held
// after it began and before it ends the backoffs due.
type gateClock struct {
	*clock.Fake
	shut    atomic.Bool
	entered chan struct{}
	open    chan struct{}
}

func newGateClock() *gateClock {
	return &gateClock{Fake: clock.NewFake(t0), entered: make(chan struct{}, 1), open: make(chan struct{})}
}

func (c *gateClock) Now() time.Time {
	if inTimerCall() && c.shut.CompareAndSwap(true, false) {
		c.entered <- struct{}{}
		<-c.open
	}
	return c.Fake.Now()
}

// inTimerCall reports whether the caller runs in a call of timers.
func inTimerCall() bool {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "/event.(*group).timers") {
			return true
		}
		if !more {
			return false
		}
	}
}

func wait[T any](t *testing.T, c <-chan T, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
	}
}

// A deadline earlier than the one the timer is armed for moves the timer
// (one timer, never two); a later one leaves it. Each call ends what is
// due and arms the timer for the next end; with nothing left it is not
// armed.
func TestTimerArmsForTheEarliestDeadline(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g := timerGroup(clk)
	assert.Zero(t, clk.Timers(), "no timer before the first deadline")
	backoffUntil(g, 1, t0.Add(10*time.Second))
	backoffUntil(g, 2, t0.Add(5*time.Second))
	backoffUntil(g, 3, t0.Add(7*time.Second))
	armed, _, _ := timerState(g)
	assert.Equal(t, t0.Add(5*time.Second), armed)
	assert.Equal(t, 1, clk.Timers())

	for i, next := range []time.Time{t0.Add(7 * time.Second), t0.Add(10 * time.Second), {}} {
		clk.Set(armed)
		require.Eventually(t, func() bool {
			a, w, r := timerState(g)
			return a.Equal(next) && w == 2-i && r == i+1
		}, 10*time.Second, time.Millisecond, "after the end at %v", armed)
		armed = next
	}
	assert.Zero(t, clk.Timers(), "armed with nothing waiting")

	g.stopTimers()
	backoffUntil(g, 4, t0.Add(time.Hour))
	assert.Zero(t, clk.Timers(), "armed after the stop")
}

// A deadline that comes while a call runs is not lost: the call arms the
// timer for it as it ends (it does not arm it then: the call would find it
// too). A deadline due already is ended by that call. A second call that
// starts meanwhile (time.AfterFunc runs f again when a Reset comes after
// the timer fired) returns at once, ending nothing: the calls never
// overlap.
func TestTimerDeadlineWhileItsCallRuns(t *testing.T) {
	t.Parallel()
	clk := newGateClock()
	g := timerGroup(clk)
	backoffUntil(g, 1, t0.Add(time.Second))
	clk.shut.Store(true)
	clk.Set(t0.Add(time.Second))
	wait(t, clk.entered, "call of the timer")

	backoffUntil(g, 2, t0.Add(3*time.Second))
	backoffUntil(g, 3, t0.Add(time.Second)) // due already
	armed, waiting, retry := timerState(g)
	assert.True(t, armed.IsZero(), "armed while its call runs")
	assert.Zero(t, clk.Timers(), "armed while its call runs")
	assert.Equal(t, 3, waiting)
	assert.Zero(t, retry)

	g.mu.Lock()
	g.timerRuns.Add(1) // as a Reset of the fired timer schedules a call
	g.mu.Unlock()
	second := make(chan struct{})
	go func() {
		defer close(second)
		g.timers()
	}()
	wait(t, second, "return of the second call")
	_, waiting, retry = timerState(g)
	assert.Equal(t, 3, waiting, "the second call ended backoffs while the first ran")
	assert.Zero(t, retry)

	close(clk.open)
	require.Eventually(t, func() bool {
		a, w, r := timerState(g)
		return a.Equal(t0.Add(3*time.Second)) && w == 1 && r == 2
	}, 10*time.Second, time.Millisecond, "the call did not end both due backoffs and arm for the one after")
	assert.Equal(t, 1, clk.Timers())
	clk.Set(t0.Add(3 * time.Second))
	require.Eventually(t, func() bool {
		_, w, r := timerState(g)
		return w == 0 && r == 3
	}, 10*time.Second, time.Millisecond)
	g.stopTimers()
}

// Stopping disarms the timer: nothing runs at the deadline it was armed
// for, and no later deadline arms it.
func TestTimerStopWhileArmed(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g := timerGroup(clk)
	backoffUntil(g, 1, t0.Add(time.Second))
	require.Equal(t, 1, clk.Timers())
	g.stopTimers()
	assert.Zero(t, clk.Timers())
	clk.Advance(time.Hour)
	backoffUntil(g, 2, t0.Add(2*time.Hour))
	assert.Zero(t, clk.Timers())
	_, waiting, retry := timerState(g)
	assert.Equal(t, 2, waiting)
	assert.Zero(t, retry)
	g.stopTimers() // again: nothing to stop
}

// Stopping while a call runs waits for the call to end, and the call then
// arms the timer no more, though a backoff waits.
func TestTimerStopWaitsForItsCall(t *testing.T) {
	t.Parallel()
	clk := newGateClock()
	g := timerGroup(clk)
	backoffUntil(g, 1, t0.Add(time.Second))
	backoffUntil(g, 2, t0.Add(5*time.Second))
	clk.shut.Store(true)
	clk.Set(t0.Add(time.Second))
	wait(t, clk.entered, "call of the timer")

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.stopTimers()
	}()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.timersOff
	}, 10*time.Second, time.Millisecond)
	select {
	case <-stopped:
		t.Fatal("stopTimers returned while a call of the timer runs")
	default:
	}
	close(clk.open)
	wait(t, stopped, "return of stopTimers")
	armed, waiting, retry := timerState(g)
	assert.True(t, armed.IsZero())
	assert.Zero(t, clk.Timers(), "the call armed the timer after the stop")
	assert.Equal(t, 1, waiting)
	assert.Equal(t, 1, retry, "the running call ended its due backoff")
}

// On the wall clock, with deadlines coming from several goroutines while
// the timer fires (some due already, some moving it earlier), every
// backoff ends, and stopping the timer waits for no call that never comes.
func TestTimerEndsEveryBackoffOnTheWallClock(t *testing.T) {
	t.Parallel()
	g := timerGroup(clock.System())
	const workers, each = 4, 200
	var wg sync.WaitGroup
	var seq atomic.Uint64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range each {
				d := time.Duration(rng.IntN(3000)-500) * time.Microsecond
				backoffUntil(g, seq.Add(1), time.Now().Add(d))
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		_, w, r := timerState(g)
		return w == 0 && r == workers*each
	}, 10*time.Second, time.Millisecond, "backoffs left waiting")
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.stopTimers()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("stopTimers waits for a call that does not come")
	}
}
