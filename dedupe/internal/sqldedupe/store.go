package sqldedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/internal/sqlconn"
)

// Dialect is what differs between the databases.
type Dialect struct {
	// Name prefixes errors that are not dedupe's own ("sqlitededupe").
	Name string
	// Schema returns the DDL that creates the table if absent.
	Schema func(table string) []string
}

// DefaultTable is the table's default name.
const DefaultTable = "promlib_dedupe"

// Config configures a [Store].
type Config struct {
	// Table holds the keys (default "promlib_dedupe").
	Table string
	// Clock tells the time of claims and expiries (default the system
	// clock).
	Clock clock.Clock
}

// Store is a [dedupe.TxStore] in a SQL database.
type Store struct {
	src   sqlconn.Source
	d     Dialect
	t     string
	clock clock.Clock
}

var _ dedupe.TxStore = (*Store)(nil)

// New returns a store over src. It does no I/O.
func New(src sqlconn.Source, d Dialect, cfg Config) (*Store, error) {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if !sqlconn.TableName.MatchString(cfg.Table) {
		return nil, fmt.Errorf("%w: Table: %q: want letters, digits and _, at most 51, not starting with a digit", dedupe.ErrInvalid, cfg.Table)
	}
	return &Store{src: src, d: d, t: cfg.Table, clock: clock.Or(cfg.Clock)}, nil
}

// CreateTables creates the tables and indexes if they are absent, in
// one transaction.
func (s *Store) CreateTables(ctx context.Context) error {
	err := sqlconn.Atomic(ctx, s.src, func(c sqlconn.Conn) error {
		for _, q := range s.d.Schema(s.t) {
			if _, err := c.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.errorf("create tables: %w", err)
	}
	return nil
}

func (s *Store) errorf(format string, args ...any) error {
	return fmt.Errorf(s.d.Name+": "+format, args...)
}

func (s *Store) now() int64 { return s.clock.Now().UnixMilli() }

// Claim implements [dedupe.Store]: one upsert takes the key when it is
// absent, expired or the owner's own live claim; otherwise a read tells
// done from busy.
func (s *Store) Claim(ctx context.Context, key, owner string, lease time.Duration) (dedupe.State, error) {
	if err := checkArgs(key, owner); err != nil {
		return 0, err
	}
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return 0, err
	}
	for range 3 {
		now := s.now()
		var one int
		ok, err := sqlconn.QueryRow(ctx, c, `INSERT INTO `+s.t+` (k, owner, done, expires) VALUES ($1, $2, 0, $3)
			ON CONFLICT (k) DO UPDATE SET owner = excluded.owner, done = 0, expires = excluded.expires
			WHERE `+s.t+`.expires <= $4 OR (`+s.t+`.owner = excluded.owner AND `+s.t+`.done = 0)
			RETURNING 1`, []any{key, owner, now + lease.Milliseconds(), now}, &one)
		if err != nil {
			return 0, s.errorf("claim %q: %w", key, err)
		}
		if ok {
			return dedupe.Acquired, nil
		}
		var done int
		ok, err = sqlconn.QueryRow(ctx, c, `SELECT done FROM `+s.t+` WHERE k = $1 AND expires > $2`, []any{key, s.now()}, &done)
		if err != nil {
			return 0, s.errorf("claim %q: %w", key, err)
		}
		if !ok {
			continue // expired or released meanwhile: try again
		}
		if done != 0 {
			return dedupe.Done, nil
		}
		return dedupe.Busy, nil
	}
	return dedupe.Busy, nil
}

// Complete implements [dedupe.Store].
func (s *Store) Complete(ctx context.Context, key, owner string, ttl time.Duration) error {
	if err := checkArgs(key, owner); err != nil {
		return err
	}
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return err
	}
	// One upsert, as Claim's: the owner's claim, live or expired, or a
	// key nobody holds (an expired row, or none) takes the mark.
	now := s.now()
	var one int
	ok, err := sqlconn.QueryRow(ctx, c, `INSERT INTO `+s.t+` (k, owner, done, expires) VALUES ($1, $2, 1, $3)
		ON CONFLICT (k) DO UPDATE SET owner = excluded.owner, done = 1, expires = excluded.expires
		WHERE `+s.t+`.expires <= $4 OR (`+s.t+`.owner = excluded.owner AND `+s.t+`.done = 0)
		RETURNING 1`, []any{key, owner, now + ttl.Milliseconds(), now}, &one)
	if err != nil {
		return s.errorf("complete %q: %w", key, err)
	}
	if !ok {
		return fmt.Errorf("%w: key %q by %q", dedupe.ErrNotOwner, key, owner)
	}
	return nil
}

// Release implements [dedupe.Store].
func (s *Store) Release(ctx context.Context, key, owner string) error {
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := c.Exec(ctx, `DELETE FROM `+s.t+` WHERE k = $1 AND owner = $2 AND done = 0`, key, owner); err != nil {
		return s.errorf("release %q: %w", key, err)
	}
	return nil
}

// Seen implements [dedupe.Store].
func (s *Store) Seen(ctx context.Context, key string) (bool, error) {
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return false, err
	}
	var one int
	ok, err := sqlconn.QueryRow(ctx, c, `SELECT 1 FROM `+s.t+` WHERE k = $1 AND done = 1 AND expires > $2`, []any{key, s.now()}, &one)
	if err != nil {
		return false, s.errorf("seen %q: %w", key, err)
	}
	return ok, nil
}

// Reap implements [dedupe.Store].
func (s *Store) Reap(ctx context.Context) (int, error) {
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return 0, err
	}
	n, err := c.Exec(ctx, `DELETE FROM `+s.t+` WHERE expires <= $1`, s.now())
	if err != nil {
		return 0, s.errorf("reap: %w", err)
	}
	return int(n), nil
}

// MarkDone implements [dedupe.TxStore]: in the transaction ctx carries,
// one upsert writes key's done mark, replacing an expired row. A live row
// of key (a mark, or a claim) leaves it unchanged, and MarkDone returns
// an error wrapping [dedupe.ErrDone]. In PostgreSQL a concurrent
// transaction marking the same key waits for the first one's end: it
// finds the mark when that commits, and writes its own when it rolls
// back.
func (s *Store) MarkDone(ctx context.Context, key, owner string, ttl time.Duration) error {
	if err := checkArgs(key, owner); err != nil {
		return err
	}
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	n, err := c.Exec(ctx, `INSERT INTO `+s.t+` (k, owner, done, expires) VALUES ($1, $2, 1, $3)
		ON CONFLICT (k) DO UPDATE SET owner = excluded.owner, done = 1, expires = excluded.expires
		WHERE `+s.t+`.expires <= $4`, key, owner, now+ttl.Milliseconds(), now)
	if err != nil {
		return s.errorf("mark %q: %w", key, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", dedupe.ErrDone, key)
	}
	return nil
}

func checkArgs(key, owner string) error {
	if key == "" {
		return fmt.Errorf("%w: key: must not be empty", dedupe.ErrInvalid)
	}
	if owner == "" {
		return fmt.Errorf("%w: owner: must not be empty", dedupe.ErrInvalid)
	}
	return nil
}
