package ratelimit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/promethean/promlib/clock"
)

// Defaults of [KeyedConfig].
const (
	DefaultMaxKeys       = 100_000
	DefaultSweepInterval = time.Minute
)

// KeyedConfig configures a [Keyed] set. The zero value of a field means its
// default.
type KeyedConfig struct {
	// Limit is the bucket of every key; a zero Limit makes the set allow
	// everything and keep nothing.
	Limit Limit
	// MaxKeys bounds the number of buckets kept (default 100,000). Beyond
	// it, the least recently used buckets are forgotten, even if not full.
	MaxKeys int
	// SweepInterval is how often full buckets are forgotten (default: the
	// time a bucket takes to refill from empty, between 1s and 1 minute).
	SweepInterval time.Duration
	// Clock tells the time of Allow and Wait; nil means the system clock.
	Clock clock.Clock
}

func (c *KeyedConfig) setDefaults() {
	c.Clock = clock.Or(c.Clock)
	if c.MaxKeys == 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
		if c.Limit.Enabled() {
			refill := time.Duration(float64(c.Limit.burst()) / c.Limit.Rate * float64(time.Second))
			c.SweepInterval = min(max(refill, time.Second), DefaultSweepInterval)
		}
	}
}

// Validate reports every problem of c, joined.
func (c *KeyedConfig) Validate() error {
	var errs []error
	if err := c.Limit.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxKeys < 0 {
		errs = append(errs, invalid("MaxKeys", "%d is negative", c.MaxKeys))
	}
	if c.SweepInterval < 0 {
		errs = append(errs, invalid("SweepInterval", "%v is negative", c.SweepInterval))
	}
	return errors.Join(errs...)
}

// Keyed is a set of token buckets, one per key, that forgets idle keys. It
// is safe for concurrent use.
type Keyed struct {
	cfg KeyedConfig

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// NewKeyed returns an empty set.
func NewKeyed(cfg KeyedConfig) (*Keyed, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Keyed{cfg: cfg, buckets: make(map[string]*bucket)}, nil
}

// Limit returns the bucket setting of every key.
func (k *Keyed) Limit() Limit { return k.cfg.Limit }

// Allow takes a token of key's bucket now and reports whether there was one.
func (k *Keyed) Allow(key string) bool { return k.AllowAt(k.cfg.Clock.Now(), key) }

// AllowAt is Allow at time now.
func (k *Keyed) AllowAt(now time.Time, key string) bool {
	return AllOrNone(now, k.ReserveAt(now, key))
}

// ReserveAt takes a token of key's bucket at now, for use with [AllOrNone].
// It returns nil when the set has no limit.
func (k *Keyed) ReserveAt(now time.Time, key string) *rate.Reservation {
	if !k.cfg.Limit.Enabled() {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buckets[key]
	if b == nil {
		k.maybeSweep(now, 1)
		b = &bucket{lim: NewLimiter(k.cfg.Limit)}
		k.buckets[key] = b
	} else {
		k.maybeSweep(now, 0)
	}
	if now.After(b.used) {
		b.used = now
	}
	return b.lim.ReserveN(now, 1)
}

// HasTokenAt reports whether key's bucket holds a token at now, without
// taking it; a key the set does not keep has a full bucket. With
// [Keyed.ChargeAt] it limits what only some outcomes pay for, such as
// failed logins: refuse while there is no token, charge after a failure.
func (k *Keyed) HasTokenAt(now time.Time, key string) bool {
	if !k.cfg.Limit.Enabled() {
		return true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buckets[key]
	return b == nil || b.lim.TokensAt(now) >= 1
}

// ChargeAt takes a token of key's bucket at now, even one it does not hold:
// the bucket then owes it and holds no token until it has refilled that
// far. Charges that passed [Keyed.HasTokenAt] together are all paid.
func (k *Keyed) ChargeAt(now time.Time, key string) {
	_ = k.ReserveAt(now, key)
}

// Wait takes a token of key's bucket, waiting for one until ctx ends.
func (k *Keyed) Wait(ctx context.Context, key string) error {
	now := k.cfg.Clock.Now()
	r := k.ReserveAt(now, key)
	if r == nil {
		return ctx.Err()
	}
	if !r.OK() {
		return invalid("Limit", "burst %d cannot pass one event", k.cfg.Limit.burst())
	}
	d := r.DelayFrom(now)
	if d == 0 {
		return nil
	}
	t := k.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}

// Len returns how many buckets the set keeps now.
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.buckets)
}

// maybeSweep forgets full buckets when a sweep is due or the set would
// grow past MaxKeys by adding more; called with k.mu held.
func (k *Keyed) maybeSweep(now time.Time, adding int) {
	over := len(k.buckets)+adding > k.cfg.MaxKeys
	if !over && now.Sub(k.lastSweep) < k.cfg.SweepInterval {
		return
	}
	k.lastSweep = now
	burst := float64(k.cfg.Limit.burst())
	for key, b := range k.buckets {
		if b.lim.TokensAt(now) >= burst {
			delete(k.buckets, key)
		}
	}
	if len(k.buckets)+adding <= k.cfg.MaxKeys {
		return
	}
	// Everything left is busy: forget the least recently used down to 90%
	// of the bound, so that the next sweep is not due at the next key.
	type kb struct {
		key  string
		used time.Time
	}
	all := make([]kb, 0, len(k.buckets))
	for key, b := range k.buckets {
		all = append(all, kb{key, b.used})
	}
	slices.SortFunc(all, func(a, b kb) int { return a.used.Compare(b.used) })
	keep := k.cfg.MaxKeys - k.cfg.MaxKeys/10 - adding
	for _, e := range all[:max(0, len(all)-max(keep, 0))] {
		delete(k.buckets, e.key)
	}
}
