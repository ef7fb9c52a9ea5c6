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
