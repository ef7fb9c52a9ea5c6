package clock

import "time"

// Clock tells the time and arms timers. [System] is the wall clock; [Fake]
// is moved by hand.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d has
	// passed, as time.NewTimer does.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has passed, as
	// time.AfterFunc does. The returned timer's C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer of a [Clock]. Stop and Reset behave as those of
// time.Timer since Go 1.23: after Stop or Reset returns, no stale value is
// received from C.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// ResetAt arms t, a timer of c, to fire when c reads at, or at once when
// at has passed. A [Fake]'s timer is armed for at itself, so the fake
// time moving between the caller's reading of it and this call (another
// goroutine advancing it) makes the timer no later. Other timers are
// Reset by at.Sub(c.Now()), unless they have a ResetAt(time.Time) bool
// method of their own. It reports what Reset would.
//
// A loop that sleeps until a time of its clock arms its timer with
// ResetAt, not with Reset of a duration computed from an earlier
// c.Now(): that duration counts from the time the timer is armed, and
// the timer would fire late by however far the clock moved in between.
func ResetAt(c Clock, t Timer, at time.Time) bool {
	if a, ok := t.(interface{ ResetAt(time.Time) bool }); ok {
		return a.ResetAt(at)
	}
	return t.Reset(at.Sub(c.Now()))
}

// System returns the wall clock.
func System() Clock { return systemClock{} }

// Or returns c, or [System] when c is nil; Config defaults use it.
func Or(c Clock) Clock {
	if c == nil {
		return System()
	}
	return c
}

// IsSystem reports whether c is the wall clock of [System]: code that
// reads the wall clock through another library (a UUIDv7's timestamp) may
// use that reading instead of asking c again.
func IsSystem(c Clock) bool {
	_, ok := c.(systemClock)
	return ok
}

// Since returns the time elapsed on c since t.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return systemTimer{time.AfterFunc(d, f)}
}

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time        { return s.t.C }
func (s systemTimer) Stop() bool                 { return s.t.Stop() }
func (s systemTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }
