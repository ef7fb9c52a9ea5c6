package outbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/txn"
)

// MemoryStore is an in-process [Store], for tests and examples.
type MemoryStore struct {
	mu    sync.Mutex
	rows  []*Row // in Seq order
	first int    // rows before it are sent or failed
	seq   uint64 // the last Seq given
	stats Stats
	byID  map[string]*Row
	lease struct {
		worker  string
		token   int64
		expires time.Time
	}
	watchers []chan struct{}
	clock    clock.Clock
}

var (
	_ Store    = (*MemoryStore)(nil)
	_ Notifier = (*MemoryStore)(nil)
)

// Watch implements [Notifier].
func (s *MemoryStore) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.watchers = append(s.watchers, ch)
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		s.watchers = slices.DeleteFunc(s.watchers, func(c chan struct{}) bool { return c == ch })
		s.mu.Unlock()
	}
}

// MemoryStoreConfig configures a [MemoryStore].
type MemoryStoreConfig struct {
	// Clock tells the time of leases, retries and row timestamps; nil
	// means the system clock.
	Clock clock.Clock
}

// NewMemoryStore returns an empty in-memory outbox on the system clock.
func NewMemoryStore() *MemoryStore { return NewMemoryStoreWith(MemoryStoreConfig{}) }

// NewMemoryStoreWith returns an empty in-memory outbox configured by cfg.
func NewMemoryStoreWith(cfg MemoryStoreConfig) *MemoryStore {
	return &MemoryStore{byID: make(map[string]*Row), clock: clock.Or(cfg.Clock)}
}

// Add implements [Store]. All messages are stored, or none. When ctx
// carries a memory transaction ([txn.Memory]), the rows are stored when
// it commits, and not at all when it rolls back.
func (s *MemoryStore) Add(ctx context.Context, msgs ...Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if tx := txn.MemoryTxFrom(ctx); tx != nil {
		return s.addInTx(tx, msgs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := s.newRowsLocked(msgs, nil)
	if err != nil {
		return err
	}
	s.insertLocked(rows)
	return nil
}

// newRowsLocked checks msgs and returns them as rows; an id the outbox
// holds, or pending holds, is refused.
func (s *MemoryStore) newRowsLocked(msgs []Message, pending map[string]bool) ([]Row, error) {
	now := s.clock.Now()
	rows := make([]Row, len(msgs))
	seen := make(map[string]bool, len(msgs))
	for i, m := range msgs {
		r, err := NewRow(m, now)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if s.byID[r.ID] != nil || seen[r.ID] || pending[r.ID] {
			return nil, invalid("id", "message %d: id %q is already in the outbox", i, r.ID)
		}
		seen[r.ID] = true
		r.Headers = maps.Clone(r.Headers)
		r.Payload = slices.Clone(r.Payload)
		rows[i] = r
	}
	return rows, nil
}

// txRows are the rows a memory transaction added to a MemoryStore.
type txRows struct {
	s    *MemoryStore
	rows []Row
	ids  map[string]bool
}

func (p *txRows) Lock()   { p.s.mu.Lock() }
func (p *txRows) Unlock() { p.s.mu.Unlock() }

// Check refuses the commit when a row's id was added since.
func (p *txRows) Check() error {
	for _, r := range p.rows {
		if p.s.byID[r.ID] != nil {
			return invalid("id", "id %q is already in the outbox", r.ID)
		}
	}
	return nil
}

func (p *txRows) Apply() { p.s.insertLocked(p.rows) }

func (s *MemoryStore) addInTx(tx *txn.MemoryTx, msgs []Message) error {
	part, err := tx.Join(s, func() txn.Participant { return &txRows{s: s, ids: make(map[string]bool)} })
	if err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	p := part.(*txRows)
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := s.newRowsLocked(msgs, p.ids)
	if err != nil {
		return err
	}
	for _, r := range rows {
		p.ids[r.ID] = true
	}
	p.rows = append(p.rows, rows...)
	return nil
}

// insertLocked stores rows checked by Add, giving them their Seq, and
// wakes the watchers.
func (s *MemoryStore) insertLocked(rows []Row) {
	for i := range rows {
		r := &rows[i]
		s.seq++
		r.Seq = s.seq
		s.rows = append(s.rows, r)
		s.byID[r.ID] = r
	}
	s.stats.Pending += int64(len(rows))
	for _, ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// AcquireLease implements [Store].
func (s *MemoryStore) AcquireLease(ctx context.Context, worker string, ttl time.Duration) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	l := &s.lease
	switch {
	case l.worker == worker && l.expires.After(now):
	case l.worker == "" || !l.expires.After(now):
		l.worker = worker
		l.token++
	default:
		return 0, false, nil
	}
	l.expires = now.Add(ttl)
	return l.token, true, nil
}

// ReleaseLease implements [Store].
func (s *MemoryStore) ReleaseLease(ctx context.Context, worker string, token int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease.worker == worker && s.lease.token == token {
		s.lease.worker = ""
	}
	return nil
}

// Claim implements [Store].
func (s *MemoryStore) Claim(ctx context.Context, token int64, n int) ([]Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, invalid("n", "%d, want at least 1", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.lease.token != token || s.lease.worker == "" || !s.lease.expires.After(now) {
		return nil, ErrNotLeader
	}
	held := make(map[string]bool)
	var out []Row
	for _, r := range s.rows[s.first:] {
		if len(out) == n {
			break
		}
		if r.Status != StatusPending {
			continue
		}
		k := r.OrderingKey()
		if held[k] {
			continue
		}
		if r.NextAt.After(now) {
			held[k] = true // it holds back the rows behind it
			continue
		}
		out = append(out, *r)
	}
	return out, nil
}

// MarkSent implements [Store].
func (s *MemoryStore) MarkSent(ctx context.Context, token int64, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	for _, id := range ids {
		if r := s.byID[id]; r == nil || r.Token > token || r.Status != StatusPending {
			return fmt.Errorf("%w: row %q", ErrStaleClaim, id)
		}
	}
	for _, id := range ids {
		r := s.byID[id]
		r.Status, r.Token, r.SentAt = StatusSent, token, now
	}
	s.stats.Pending -= int64(len(ids))
	s.stats.Sent += int64(len(ids))
	s.advance()
	return nil
}

// MarkRetry implements [Store].
func (s *MemoryStore) MarkRetry(ctx context.Context, token int64, retry Retry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byID[retry.ID]
	if r == nil || r.Token > token || r.Status != StatusPending {
		return fmt.Errorf("%w: row %q", ErrStaleClaim, retry.ID)
	}
	r.Token = token
	r.Attempts++
	r.LastError = retry.Err
	r.NextAt = retry.Next
	if retry.Final {
		r.Status = StatusFailed
		s.stats.Pending--
		s.stats.Failed++
		s.advance()
	}
	return nil
}

func (s *MemoryStore) advance() {
	for s.first < len(s.rows) && s.rows[s.first].Status != StatusPending {
		s.first++
	}
}

// DeleteSent implements [Store].
func (s *MemoryStore) DeleteSent(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, invalid("limit", "%d, want at least 1", limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	kept := s.rows[:0]
	for i, r := range s.rows {
		if n < limit && r.Status == StatusSent && r.SentAt.Before(before) {
			delete(s.byID, r.ID)
			n++
			if i < s.first {
				s.first--
			}
			continue
		}
		kept = append(kept, r)
	}
	clear(s.rows[len(kept):])
	s.rows = kept
	s.stats.Sent -= int64(n)
	return n, nil
}

// Stats implements [Store].
func (s *MemoryStore) Stats(ctx context.Context) (Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats, nil
}

// Rows returns a copy of every row, in Seq order.
func (s *MemoryStore) Rows() []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Row, len(s.rows))
	for i, r := range s.rows {
		out[i] = *r
	}
	return out
}

// Row returns the row with the given id.
func (s *MemoryStore) Row(ctx context.Context, id string) (Row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byID[id]
	if r == nil {
		return Row{}, fmt.Errorf("outbox: row %q: not found", id)
	}
	return *r, nil
}
