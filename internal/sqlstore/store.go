package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/watchhub"
)

// Dialect is what differs between the databases.
type Dialect struct {
	// Name prefixes errors ("sqlitestore").
	Name string
	// Schema is the DDL that creates the tables if absent, run in order.
	Schema []string
	// AnonymousParams writes the group commit's large statements (the
	// multi-row INSERT, the id lookup) with ? parameters instead of $N.
	// modernc.org/sqlite matches a $N parameter to its argument by name,
	// a search over the arguments for each parameter: quadratic in the
	// 6,000 parameters of a 500-row INSERT, where ? is bound by position.
	AnonymousParams bool
	// InsertRows bounds the rows of one INSERT statement (default and at
	// most 500). The same driver binds ? parameters in time quadratic in
	// their number, so SQLite writes shorter statements.
	InsertRows int
	// Notify, if set, is an SQL expression that the statement advancing a
	// topic's head evaluates in its RETURNING clause, once per append
	// transaction and topic, with promlib_topics' new row in scope
	// (PostgreSQL sends NOTIFY there: one statement fewer per transaction).
	Notify string
	// FenceLock ends the SELECT of a lease row with which a fenced write
	// checks its fence, in the write's transaction: a locking clause that
	// holds the row until the write commits, so that no other member is
	// granted the lease between the check and the write (PostgreSQL:
	// " FOR SHARE"). Empty where a write transaction already shuts out
	// every other writer from its BEGIN (SQLite, with the writer's
	// transactions taking the write lock at BEGIN).
	FenceLock string
	// GroupLock ends the sub-SELECT of a group's promlib_groups row in a
	// Heartbeat, which holds the row for the statement (PostgreSQL:
	// " FOR KEY SHARE", which UPDATEs of the settings do not wait for);
	// RowLock ends the SELECTs with which ExpireGroup locks the group's
	// rows before it checks them (PostgreSQL: " FOR UPDATE"). So a
	// heartbeat is ordered before an expiry of its group or after it (see
	// [Store.ExpireGroup]). Empty where a write transaction shuts out
	// every other writer (SQLite).
	GroupLock, RowLock string
	// RecordTypes, if set, are the SQL types of a record's nRecordCols
	// columns (topic, then recordCols), and make an append of one topic
	// with fresh ids and rows for one INSERT a single statement, run
	// without BEGIN and COMMIT: the counter row's upsert in a WITH clause
	// whose new head the INSERT reads (see appendOneStatement). On
	// PostgreSQL that is one round trip to the server instead of four.
	// The types cast the parameters of the INSERT's VALUES list, which
	// PostgreSQL cannot infer there.
	RecordTypes []string
	// Columns, if set (with RecordTypes), turns the arguments of records
	// (nRecordCols per record, as the store makes them: strings, int64s,
	// []byte, and nil for a NULL text) into one array per column, of the
	// column's RecordTypes type, and makes every INSERT of records one
	// statement with one text whatever their number: INSERT ... SELECT
	// FROM unnest of the arrays. A VALUES list has a text per row count,
	// each parsed, planned and prepared by the server on its first use,
	// and at most maxRows rows; the arrays have neither limit, and the
	// server plans the statement once.
	Columns func(args []any) ([]any, error)
	// BatchRenewals makes concurrent Renew calls share a write
	// transaction: one goroutine writes all the renewals waiting (up to
	// MaxRenewBatch) in one transaction and commits once, as appends are
	// written (the group commit). It suits a database whose write
	// transactions shut out every other writer from their BEGIN and whose
	// commits each cost a sync (SQLite, with one writing connection):
	// renewals are written one at a time there anyway, and thousands of
	// groups renewing every few seconds would otherwise need more commits
	// than the disk syncs. Nothing is locked that another writer could
	// hold, so the shared transaction cannot deadlock. Not on PostgreSQL:
	// its renewals run concurrently on the pool's connections, each
	// locking one group's rows; a transaction of many groups' renewals
	// would hold all their rows (promlib_groups, promlib_members,
	// promlib_leases) until its commit, in an order of arrival that
	// another process's batch or an ExpireGroup could take in another
	// order (a deadlock, which fails the whole batch), and would make every
	// renewal wait for the slowest of its batch.
	BatchRenewals bool
}

// Defaults of [Config].
const (
	DefaultMaxBatch     = 1000
	DefaultPollInterval = 200 * time.Millisecond
	DefaultWriteTimeout = 30 * time.Second
)

// Config configures a [Store].
type Config struct {
	// Clock tells the time of heartbeats and leases (default the system
	// clock).
	Clock clock.Clock
	// MaxBatch bounds the records of one group-commit transaction (default
	// 1000). A single Append larger than it is written whole.
	MaxBatch int
	// PollInterval is how often a watched topic is checked for records
	// appended by other processes (default 200ms).
	PollInterval time.Duration
	// WriteTimeout bounds one group-commit transaction (default 30s).
	WriteTimeout time.Duration
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	c.Clock = clock.Or(c.Clock)
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is an [event.Store], [event.CursorStore], [event.LeaseStore],
// [event.GroupStateStore], [event.Notifier], [event.KeyStore],
// [event.Pruner], [event.Lister], [event.TopicStore] and
// [event.GroupStore] in a SQL database.
type Store struct {
	w, r *sql.DB // writes and reads; may be the same
	d    Dialect
	cfg  Config

	reqs   chan *appendReq
	renews chan *renewReq  // with Dialect.BatchRenewals
	ctx    context.Context // cancelled by Close
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool

	hub *watchhub.Hub

	inserts map[int]string // the INSERT of n records; the writer goroutine's
	oneStmt map[int]string // the one-statement append of n records; the writer goroutine's

	groupsMu    sync.Mutex
	groupsKnown map[[2]string]bool // (topic, group) rows this store inserted
}

var (
	_ event.Store           = (*Store)(nil)
	_ event.CursorStore     = (*Store)(nil)
	_ event.LeaseStore      = (*Store)(nil)
	_ event.GroupStateStore = (*Store)(nil)
	_ event.Notifier        = (*Store)(nil)
	_ event.KeyStore        = (*Store)(nil)
	_ event.Pruner          = (*Store)(nil)
	_ event.Lister          = (*Store)(nil)
	_ event.TopicStore      = (*Store)(nil)
	_ event.GroupStore      = (*Store)(nil)
)

// New returns a store that writes through w and reads through r (which may
// be w), creating its tables if they are absent. The store does not close
// the databases.
func New(ctx context.Context, w, r *sql.DB, d Dialect, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if d.RecordTypes != nil && len(d.RecordTypes) != nRecordCols {
		return nil, fmt.Errorf("%s: dialect: %d RecordTypes, want %d", d.Name, len(d.RecordTypes), nRecordCols)
	}
	if d.Columns != nil && d.RecordTypes == nil {
		return nil, fmt.Errorf("%s: dialect: Columns without RecordTypes", d.Name)
	}
	for _, stmt := range d.Schema {
		if _, err := w.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("%s: create schema: %w", d.Name, err)
		}
	}
	s := &Store{w: w, r: r, d: d, cfg: cfg, reqs: make(chan *appendReq, 256), groupsKnown: make(map[[2]string]bool)}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.hub = s.newHub()
	s.wg.Add(1)
	go s.appender()
	if d.BatchRenewals {
		s.renews = make(chan *renewReq, MaxRenewBatch)
		s.wg.Add(1)
		go s.renewer()
	}
	return s, nil
}

// Close stops the store's goroutines; appends and batched renewals in
// flight fail with [event.ErrClosed]. It does not close the databases.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	return nil
}

// Context is cancelled when the store closes.
func (s *Store) Context() context.Context { return s.ctx }

// WaitGroup counts the store's goroutines; a dialect's own goroutine adds
// itself so that Close waits for it.
func (s *Store) WaitGroup() *sync.WaitGroup { return &s.wg }

// Logger returns the configured logger.
func (s *Store) Logger() *slog.Logger { return s.cfg.Logger }

func (s *Store) errorf(format string, args ...any) error {
	return fmt.Errorf(s.d.Name+": "+format, args...)
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", event.ErrInvalid, field, fmt.Sprintf(format, args...))
}

// seqArg converts a seq for the database, whose integers are signed.
func seqArg(field string, seq uint64) (int64, error) {
	if seq > math.MaxInt64 {
		return 0, invalid(field, "%d is above the largest seq a SQL store keeps (2^63-1)", seq)
	}
	return int64(seq), nil
}

func checkPartition(p int) error {
	if p < 0 || p > math.MaxInt32 {
		return invalid("partition", "%d, want 0 to 2^31-1", p)
	}
	return nil
}

// Head implements [event.Store].
func (s *Store) Head(ctx context.Context, topic string) (uint64, error) {
	var h int64
	err := s.r.QueryRowContext(ctx, `SELECT head FROM promlib_topics WHERE topic = $1`, topic).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.errorf("head of %q: %w", topic, err)
	}
	return uint64(h), nil
}

// Read implements [event.Store].
func (s *Store) Read(ctx context.Context, topic string, afterSeq uint64, limit int) ([]event.Record, error) {
	if limit <= 0 {
		return nil, invalid("limit", "%d, want at least 1", limit)
	}
	if afterSeq >= math.MaxInt64 {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+recordCols+` FROM promlib_events WHERE topic = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		topic, int64(afterSeq), limit)
	if err != nil {
		return nil, s.errorf("read %q after %d: %w", topic, afterSeq, err)
	}
	out, err := s.scanRecords(rows, topic, min(limit, 1024))
	if err != nil {
		return nil, s.errorf("read %q after %d: %w", topic, afterSeq, err)
	}
	return out, nil
}

// FindByID implements [event.Store].
func (s *Store) FindByID(ctx context.Context, topic, id string) (event.Record, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+recordCols+` FROM promlib_events WHERE topic = $1 AND id = $2`, topic, id)
	if err != nil {
		return event.Record{}, s.errorf("find %q in %q: %w", id, topic, err)
	}
	out, err := s.scanRecords(rows, topic, 1)
	if err != nil {
		return event.Record{}, s.errorf("find %q in %q: %w", id, topic, err)
	}
	if len(out) == 0 {
		return event.Record{}, fmt.Errorf("%w: id %q in topic %q", event.ErrNotFound, id, topic)
	}
	return out[0], nil
}

// FirstSeqAtOrAfter implements [event.Store].
func (s *Store) FirstSeqAtOrAfter(ctx context.Context, topic string, ms int64) (uint64, bool, error) {
	var seq sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT MIN(seq) FROM promlib_events WHERE topic = $1 AND ts >= $2`, topic, ms).Scan(&seq)
	if err != nil {
		return 0, false, s.errorf("first seq of %q at %d: %w", topic, ms, err)
	}
	return uint64(seq.Int64), seq.Valid, nil
}

// exec runs a write statement.
func (s *Store) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.w.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// inTx runs f in a write transaction, committing if it returns nil.
func (s *Store) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
