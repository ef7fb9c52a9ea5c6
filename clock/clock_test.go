package clock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
)

var t0 = time.Unix(1_700_000_000, 0)

func TestFakeFiresTimersInDueOrder(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	late := f.NewTimer(2 * time.Second)
	early := f.NewTimer(time.Second)
	f.Advance(1500 * time.Millisecond)
	select {
	case at := <-early.C():
		assert.Equal(t, t0.Add(time.Second), at)
	default:
		t.Fatal("the 1s timer did not fire at 1.5s")
	}
	select {
	case <-late.C():
		t.Fatal("the 2s timer fired at 1.5s")
	default:
	}
	assert.Equal(t, t0.Add(1500*time.Millisecond), f.Now())
	f.Advance(time.Second)
	assert.Equal(t, t0.Add(2*time.Second), <-late.C())
	assert.Equal(t, 0, f.Timers())
}

func TestFakeStopAndResetDropStaleTicks(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second)
	assert.False(t, tm.Reset(time.Second), "a fired timer was not armed")
	select {
	case <-tm.C():
		t.Fatal("a tick from before Reset was received")
	default:
	}
	assert.True(t, tm.Stop())
	f.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}
}

// ResetAt arms a fake timer for a time of the clock, whenever it is
// called: the clock moving between the caller's reading and the arm makes
// it no later, as a duration from the reading would.
func TestFakeResetAtArmsForATimeOfTheClock(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Hour)
	due := f.Now().Add(time.Second) // read, then the clock moves
	f.Advance(700 * time.Millisecond)
	assert.True(t, clock.ResetAt(f, tm, due), "the timer was armed")
	f.Advance(299 * time.Millisecond)
	select {
	case <-tm.C():
		t.Fatal("fired before its time")
	default:
	}
	f.Advance(time.Millisecond)
	select {
	case at := <-tm.C():
		assert.Equal(t, due, at)
	default:
		t.Fatal("did not fire at its time")
	}

	// A time that has come fires at once, with no stale tick before it.
	f.Advance(time.Second)
	assert.False(t, clock.ResetAt(f, tm, f.Now().Add(-time.Millisecond)), "a fired timer was not armed")
	select {
	case at := <-tm.C():
		assert.Equal(t, f.Now(), at)
	default:
		t.Fatal("a timer for a time passed did not fire at once")
	}
	assert.Equal(t, 0, f.Timers())
	assert.False(t, tm.Stop())

	var fired atomic.Int32
	done := make(chan struct{})
	af := f.AfterFunc(time.Hour, func() { fired.Add(1); close(done) })
	assert.True(t, clock.ResetAt(f, af, f.Now()))
	<-done
	assert.Equal(t, int32(1), fired.Load())
}

func TestSystemResetAt(t *testing.T) {
	t.Parallel()
	c := clock.System()
	tm := c.NewTimer(time.Hour)
	start := time.Now()
	assert.True(t, clock.ResetAt(c, tm, start.Add(20*time.Millisecond)))
	<-tm.C()
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
}

func TestFakeAfterFuncAndWaitTimers(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	var fired atomic.Int32
	done := make(chan struct{})
	go func() {
		f.AfterFunc(time.Minute, func() { fired.Add(1); close(done) })
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.WaitTimers(ctx, 1))
	f.Advance(59 * time.Second)
	assert.Equal(t, int32(0), fired.Load())
	f.Advance(time.Second)
	<-done
	assert.Equal(t, int32(1), fired.Load())
}

func TestFakeNeverGoesBack(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	f.Set(t0.Add(-time.Hour))
	assert.Equal(t, t0, f.Now())
	f.Advance(-time.Hour)
	assert.Equal(t, t0, f.Now())
}

func TestSystemAndOr(t *testing.T) {
	t.Parallel()
	assert.NotNil(t, clock.Or(nil))
	f := clock.NewFake(t0)
	assert.Same(t, f, clock.Or(f))
	before := time.Now()
	assert.False(t, clock.System().Now().Before(before))
	tm := clock.System().NewTimer(time.Millisecond)
	<-tm.C()
	assert.Equal(t, time.Minute, clock.Since(f, t0.Add(-time.Minute)))
}
