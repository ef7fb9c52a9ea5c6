package ratelimit

import (
	"errors"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// Limit is the setting of one token bucket. The zero value means no limit.
type Limit struct {
	// Rate is how many tokens per second the bucket refills; 0 means no
	// limit.
	Rate float64 `json:"rate"`
	// Burst is the bucket's capacity: how many events may pass at once
	// after a quiet spell (default: Rate rounded up, at least 1).
	Burst int `json:"burst"`
}

// Enabled reports whether l limits anything.
func (l Limit) Enabled() bool { return l.Rate > 0 }

// Validate reports every problem of l, joined.
func (l Limit) Validate() error {
	var errs []error
	if math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.Rate < 0 {
		errs = append(errs, invalid("Rate", "%v, want a finite number >= 0", l.Rate))
	}
	if l.Burst < 0 {
		errs = append(errs, invalid("Burst", "%d is negative", l.Burst))
	}
	return errors.Join(errs...)
}

// burst returns the capacity with its default filled in.
func (l Limit) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(1, int(math.Ceil(l.Rate)))
}

// NewLimiter returns a full bucket for l, or nil when l is not enabled; a
// nil *rate.Limiter is understood as "no limit" by this package.
func NewLimiter(l Limit) *rate.Limiter {
	if !l.Enabled() {
		return nil
	}
	return rate.NewLimiter(rate.Limit(l.Rate), l.burst())
}

// Reserve takes one token from lim at now and returns the reservation, or
// nil when lim is nil.
func Reserve(now time.Time, lim *rate.Limiter) *rate.Reservation {
	if lim == nil {
		return nil
	}
	return lim.ReserveN(now, 1)
}

// AllOrNone reports whether every reservation is usable now (nil ones
// are). If any is not, all of them are cancelled, so that no bucket is
// charged for an event that did not pass: all buckets are charged, or
// none.
func AllOrNone(now time.Time, rs ...*rate.Reservation) bool {
	ok := true
	for _, r := range rs {
		if r != nil && (!r.OK() || r.DelayFrom(now) > 0) {
			ok = false
			break
		}
	}
	if !ok {
		for _, r := range rs {
			if r != nil {
				r.CancelAt(now)
			}
		}
	}
	return ok
}
