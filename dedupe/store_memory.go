package dedupe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/txn"
)

// MemoryStore is an in-process [Store]. It deletes expired keys by
// itself: every SweepInterval a write (Claim, Complete) sweeps them all
// out, so the store holds the live keys and those that expired since the
// last sweep, without [RunReaper].
type MemoryStore struct {
	mu        sync.Mutex
	keys      map[string]memKey
	clock     clock.Clock
	sweep     time.Duration
	nextSweep time.Time
}

type memKey struct {
	owner    string
	done     bool
	expireAt time.Time
}

var _ TxStore = (*MemoryStore)(nil)

// MemoryStoreConfig configures a [MemoryStore].
type MemoryStoreConfig struct {
	// Clock tells the time of claims and expiries; nil means the system
	// clock.
	Clock clock.Clock
	// SweepInterval is how often writes sweep out expired keys; zero or
	// negative means [DefaultSweepInterval].
	SweepInterval time.Duration
}

// DefaultSweepInterval is how often a [MemoryStore] sweeps out expired
// keys by default.
const DefaultSweepInterval = time.Minute

// NewMemoryStore returns an empty in-memory store on the system clock.
func NewMemoryStore() *MemoryStore { return NewMemoryStoreWith(MemoryStoreConfig{}) }

// NewMemoryStoreWith returns an empty in-memory store configured by cfg.
func NewMemoryStoreWith(cfg MemoryStoreConfig) *MemoryStore {
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	c := clock.Or(cfg.Clock)
	return &MemoryStore{keys: make(map[string]memKey), clock: c, sweep: cfg.SweepInterval, nextSweep: c.Now().Add(cfg.SweepInterval)}
}

// Len returns how many keys the store holds, live or expired and not yet
// deleted.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

// sweepLocked deletes every expired key when a sweep is due, and returns
// how many it deleted.
func (s *MemoryStore) sweepLocked(now time.Time) int {
	if now.Before(s.nextSweep) {
		return 0
	}
	s.nextSweep = now.Add(s.sweep)
	return s.reapLocked(now)
}

func (s *MemoryStore) reapLocked(now time.Time) int {
	n := 0
	for key, k := range s.keys {
		if !k.expireAt.After(now) {
			delete(s.keys, key)
			n++
		}
	}
	return n
}

// Claim implements [Store].
func (s *MemoryStore) Claim(ctx context.Context, key, owner string, lease time.Duration) (State, error) {
	if err := checkArgs(key, owner); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.sweepLocked(now)
	if k, ok := s.keys[key]; ok && k.expireAt.After(now) {
		switch {
		case k.done:
			return Done, nil
		case k.owner != owner:
			return Busy, nil
		}
	}
	s.keys[key] = memKey{owner: owner, expireAt: now.Add(lease)}
	return Acquired, nil
}

// Complete implements [Store].
func (s *MemoryStore) Complete(ctx context.Context, key, owner string, ttl time.Duration) error {
	if err := checkArgs(key, owner); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.sweepLocked(now)
	if k, ok := s.keys[key]; ok && k.expireAt.After(now) && (k.done || k.owner != owner) {
		return fmt.Errorf("%w: key %q by %q", ErrNotOwner, key, owner)
	}
	s.keys[key] = memKey{owner: owner, done: true, expireAt: now.Add(ttl)}
	return nil
}

// MarkDone implements [TxStore]. When ctx carries a memory transaction
// ([txn.Memory]) the mark is written when it commits, and not at all when
// it rolls back; the commit fails with [ErrDone] when another mark or
// claim of the key came first. Without one, the mark is written at once.
func (s *MemoryStore) MarkDone(ctx context.Context, key, owner string, ttl time.Duration) error {
	if err := checkArgs(key, owner); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tx := txn.MemoryTxFrom(ctx)
	if tx == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.clock.Now()
		s.sweepLocked(now)
		if err := s.markableLocked(key, now); err != nil {
			return err
		}
		s.keys[key] = memKey{owner: owner, done: true, expireAt: now.Add(ttl)}
		return nil
	}
	part, err := tx.Join(s, func() txn.Participant { return &txMarks{s: s, marks: make(map[string]memKey)} })
	if err != nil {
		return fmt.Errorf("dedupe: mark %q: %w", key, err)
	}
	p := part.(*txMarks)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if err := s.markableLocked(key, now); err != nil {
		return err
	}
	if _, ok := p.marks[key]; ok {
		return fmt.Errorf("%w: %q, earlier in this transaction", ErrDone, key)
	}
	p.marks[key] = memKey{owner: owner, done: true, expireAt: now.Add(ttl)}
	return nil
}

// markableLocked fails with ErrDone when key holds a live mark or claim.
func (s *MemoryStore) markableLocked(key string, now time.Time) error {
	if k, ok := s.keys[key]; ok && k.expireAt.After(now) {
		return fmt.Errorf("%w: %q", ErrDone, key)
	}
	return nil
}

// txMarks are the marks a memory transaction wrote to a MemoryStore.
type txMarks struct {
	s     *MemoryStore
	marks map[string]memKey
}

func (p *txMarks) Lock()   { p.s.mu.Lock() }
func (p *txMarks) Unlock() { p.s.mu.Unlock() }

// Check refuses the commit when a key was marked or claimed since.
func (p *txMarks) Check() error {
	now := p.s.clock.Now()
	for key := range p.marks {
		if err := p.s.markableLocked(key, now); err != nil {
			return err
		}
	}
	return nil
}

func (p *txMarks) Apply() {
	for key, k := range p.marks {
		p.s.keys[key] = k
	}
}

// Release implements [Store].
func (s *MemoryStore) Release(ctx context.Context, key, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.keys[key]; ok && !k.done && k.owner == owner {
		delete(s.keys, key)
	}
	return nil
}

// Seen implements [Store].
func (s *MemoryStore) Seen(ctx context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[key]
	return ok && k.done && k.expireAt.After(s.clock.Now()), nil
}

// Reap implements [Store].
func (s *MemoryStore) Reap(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reapLocked(s.clock.Now()), nil
}

func checkArgs(key, owner string) error {
	if key == "" {
		return invalid("key", "must not be empty")
	}
	if owner == "" {
		return invalid("owner", "must not be empty")
	}
	return nil
}
