package clock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Fake is a [Clock] whose time moves only when [Fake.Advance] or
// [Fake.Set] is called. Timers due by the new time fire in order of their
// due time, each seeing [Fake.Now] at its due time. It is safe for
// concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever timers are armed
}

// NewFake returns a Fake clock that reads start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

var _ Clock = (*Fake)(nil)

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer arms a timer that fires when the fake time reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.arm(t, d)
	return t
}

// AfterFunc arms a timer that calls fn in its own goroutine when the fake
// time reaches now+d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{f: f, fn: fn}
	f.arm(t, d)
	return t
}

// Advance moves the time forward by d (a negative d is taken as zero) and
// fires every timer due by then.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	to := f.now.Add(max(d, 0))
	f.mu.Unlock()
	f.Set(to)
}

// Set moves the time to t (never backwards) and fires every timer due by
// then.
func (f *Fake) Set(t time.Time) {
	for {
		f.mu.Lock()
		if t.Before(f.now) {
			t = f.now
		}
		next := f.popDue(t)
		if next == nil {
			f.now = t
			f.mu.Unlock()
			return
		}
		if next.due.After(f.now) {
			f.now = next.due
		}
		next.fire() // never blocks: a buffered send or a new goroutine
		f.mu.Unlock()
	}
}

// Timers returns how many timers are armed.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers waits until at least n timers are armed, or ctx ends. A test
// calls it before Advance to be sure the goroutine under test has armed
// the timer the advance is meant to fire.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		armed, changed := len(f.timers), f.changed
		f.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) arm(t *fakeTimer, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armLocked(t, d)
}

func (f *Fake) armLocked(t *fakeTimer, d time.Duration) {
	t.due = f.now.Add(d)
	t.armed = true
	i, _ := slices.BinarySearchFunc(f.timers, t.due, func(x *fakeTimer, due time.Time) int {
		if x.due.After(due) {
			return 1
		}
		return -1 // equal due times keep the order they were armed in
	})
	f.timers = slices.Insert(f.timers, i, t)
	close(f.changed)
	f.changed = make(chan struct{})
}

// disarmLocked removes t; it reports whether t was armed.
func (f *Fake) disarmLocked(t *fakeTimer) bool {
	if !t.armed {
		return false
	}
	t.armed = false
	if i := slices.Index(f.timers, t); i >= 0 {
		f.timers = slices.Delete(f.timers, i, i+1)
	}
	return true
}

// popDue removes and returns the earliest timer due by t, or nil.
func (f *Fake) popDue(t time.Time) *fakeTimer {
	if len(f.timers) == 0 || f.timers[0].due.After(t) {
		return nil
	}
	next := f.timers[0]
	f.timers = slices.Delete(f.timers, 0, 1)
	next.armed = false
	return next
}

type fakeTimer struct {
	f     *Fake
	c     chan time.Time // nil for AfterFunc timers
	fn    func()
	due   time.Time
	armed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) fire() {
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.c <- t.due:
	default:
	}
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.drain()
	return t.f.disarmLocked(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.drain()
	was := t.f.disarmLocked(t)
	t.f.armLocked(t, d)
	return was
}

// ResetAt arms t to fire when the fake time reaches at (see [ResetAt]):
// the due time is at whatever the fake time is when it is called, and a
// timer whose time has come fires at once, seeing the fake time now.
func (t *fakeTimer) ResetAt(at time.Time) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.drain()
	was := t.f.disarmLocked(t)
	if !at.After(t.f.now) {
		t.due = t.f.now
		t.fire() // never blocks: a buffered send or a new goroutine
		return was
	}
	t.f.armLocked(t, at.Sub(t.f.now))
	return was
}

// drain drops a value sent but not received, so that no stale tick is seen
// after Stop or Reset.
func (t *fakeTimer) drain() {
	if t.c == nil {
		return
	}
	select {
	case <-t.c:
	default:
	}
}
