package sqloutbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/internal/sqlconn"
	"github.com/promethean/promlib/outbox"
)

// Dialect is what differs between the databases.
type Dialect struct {
	// Name prefixes errors that are not the outbox's own ("sqliteoutbox").
	Name string
	// Schema returns the DDL that creates the rows table and the lease
	// table (table+"_lease") if absent.
	Schema func(table string) []string
	// Params writes the placeholders of the statements with many
	// arguments (multi-row inserts, id lists), which have no others.
	Params sqlconn.Params
}

// Config configures a [Store].
type Config struct {
	// Table holds the rows (default "promlib_outbox"); the lease is in
	// Table+"_lease".
	Table string
	// Name tells several outboxes sharing one lease table apart (default
	// "default").
	Name string
	// Clock tells the time of leases, retries and row timestamps (default
	// the system clock).
	Clock clock.Clock
}

// DefaultTable is the rows table's default name.
const DefaultTable = "promlib_outbox"

// batch bounds the rows of one INSERT and the ids of one UPDATE.
const batch = 500

// Store is an [outbox.Store] in a SQL database.
type Store struct {
	src sqlconn.Source
	d   Dialect
	cfg Config
	t   string // the rows table
	l   string // the lease table

	mu       sync.Mutex
	watchers []chan struct{}
}

var (
	_ outbox.Store    = (*Store)(nil)
	_ outbox.Notifier = (*Store)(nil)
)

// New returns a store over src. It does no I/O.
func New(src sqlconn.Source, d Dialect, cfg Config) (*Store, error) {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if !sqlconn.TableName.MatchString(cfg.Table) {
		return nil, invalid("Table", "%q: want letters, digits and _, at most 51, not starting with a digit", cfg.Table)
	}
	return &Store{src: src, d: d, cfg: cfg, t: cfg.Table, l: cfg.Table + "_lease"}, nil
}

// CreateTables creates the tables and indexes if they are absent, in
// one transaction.
func (s *Store) CreateTables(ctx context.Context) error {
	err := sqlconn.Atomic(ctx, s.src, func(c sqlconn.Conn) error {
		for _, q := range s.d.Schema(s.cfg.Table) {
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

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", outbox.ErrInvalid, field, fmt.Sprintf(format, args...))
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// msUp is t in milliseconds rounded up, for the time a row may be tried
// again: never before t.
func msUp(t time.Time) int64 {
	m := t.UnixMilli()
	if t.After(time.UnixMilli(m)) {
		m++
	}
	return m
}

// Watch implements [outbox.Notifier]: Adds through this store wake the
// watchers, at once outside a transaction and after the commit inside
// one that a runner (sqltxn, pgtxn) began; rows added in a transaction
// the application began itself are found by the drainer's poll.
func (s *Store) Watch() (<-chan struct{}, func()) {
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

func (s *Store) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

const rowCols = `id, topic, rkey, headers, payload, ts, status, attempts, last_error, next_at, token, sent_at, seq`

// Add implements [outbox.Store]: all messages are stored, or none. In the
// transaction ctx carries, it writes in a savepoint, so a refused Add
// leaves the caller's transaction usable and without its rows.
func (s *Store) Add(ctx context.Context, msgs ...outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	now := s.cfg.Clock.Now()
	args := make([][]any, len(msgs))
	seen := make(map[string]bool, len(msgs))
	for i, m := range msgs {
		r, err := outbox.NewRow(m, now)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if seen[r.ID] {
			return invalid("id", "message %d: id %q is twice in the batch", i, r.ID)
		}
		seen[r.ID] = true
		var headers any
		if len(r.Headers) > 0 {
			b, err := json.Marshal(r.Headers)
			if err != nil {
				return invalid("headers", "message %d: %v", i, err)
			}
			headers = string(b)
		}
		args[i] = []any{r.ID, r.Topic, r.Key, headers, []byte(r.Payload), r.TS}
	}
	_, inTx, err := s.src.Conn(ctx)
	if err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	err = sqlconn.Atomic(ctx, s.src, func(c sqlconn.Conn) error {
		for chunk := range slices.Chunk(args, batch) {
			if err := s.insert(ctx, c, chunk); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, outbox.ErrInvalid) {
			return err
		}
		return s.errorf("add: %w", err)
	}
	if !inTx {
		s.wake()
	} else {
		s.src.AfterCommit(ctx, s.wake) // when a runner commits it
	}
	return nil
}

// insert inserts rows, skipping ids the table holds; when it skipped one,
// it names it in an error (and the caller rolls back).
func (s *Store) insert(ctx context.Context, c sqlconn.Conn, rows [][]any) error {
	var q strings.Builder
	q.WriteString(`INSERT INTO ` + s.t + ` (id, topic, rkey, headers, payload, ts, status) VALUES `)
	flat := make([]any, 0, 6*len(rows))
	for i, r := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(" + s.d.Params(len(flat)+1, 6) + ", 'pending')")
		flat = append(flat, r...)
	}
	q.WriteString(` ON CONFLICT (id) DO NOTHING`)
	n, err := c.Exec(ctx, q.String(), flat...)
	if err != nil {
		return err
	}
	if int(n) == len(rows) {
		return nil
	}
	ids := make([]any, len(rows))
	for i, r := range rows {
		ids[i] = r[0]
	}
	var dup string
	found, err := sqlconn.QueryRow(ctx, c, `SELECT id FROM `+s.t+` WHERE id IN (`+s.d.Params(1, len(ids))+`) LIMIT 1`, ids, &dup)
	if err != nil {
		return err
	}
	if !found {
		return invalid("id", "a message id is already in the outbox")
	}
	return invalid("id", "id %q is already in the outbox", dup)
}

// AcquireLease implements [outbox.Store] with one conditional upsert: the
// lease is taken when free, expired or the worker's own, and its token
// grows unless the worker renews its own live lease.
func (s *Store) AcquireLease(ctx context.Context, worker string, ttl time.Duration) (int64, bool, error) {
	if worker == "" {
		return 0, false, invalid("worker", "must not be empty")
	}
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return 0, false, err
	}
	now := s.cfg.Clock.Now()
	var token int64
	ok, err := sqlconn.QueryRow(ctx, c, `INSERT INTO `+s.l+` (name, worker, token, expires) VALUES ($1, $2, 1, $3)
		ON CONFLICT (name) DO UPDATE SET
			token = CASE WHEN `+s.l+`.worker = excluded.worker AND `+s.l+`.expires > $4 THEN `+s.l+`.token ELSE `+s.l+`.token + 1 END,
			worker = excluded.worker, expires = excluded.expires
		WHERE `+s.l+`.worker = excluded.worker OR `+s.l+`.worker = '' OR `+s.l+`.expires <= $4
		RETURNING token`,
		[]any{s.cfg.Name, worker, ms(now.Add(ttl)), ms(now)}, &token)
	if err != nil {
		return 0, false, s.errorf("acquire lease: %w", err)
	}
	return token, ok, nil
}

// ReleaseLease implements [outbox.Store].
func (s *Store) ReleaseLease(ctx context.Context, worker string, token int64) error {
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return err
	}
	_, err = c.Exec(ctx, `UPDATE `+s.l+` SET worker = '' WHERE name = $1 AND worker = $2 AND token = $3`, s.cfg.Name, worker, token)
	if err != nil {
		return s.errorf("release lease: %w", err)
	}
	return nil
}

// Claim implements [outbox.Store]. It pages through pending rows in seq
// order, holding back the rows of ordering keys whose earlier row is not
// due.
func (s *Store) Claim(ctx context.Context, token int64, n int) ([]outbox.Row, error) {
	if n <= 0 {
		return nil, invalid("n", "%d, want at least 1", n)
	}
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Clock.Now()
	var one int
	leader, err := sqlconn.QueryRow(ctx, c, `SELECT 1 FROM `+s.l+` WHERE name = $1 AND token = $2 AND worker <> '' AND expires > $3`,
		[]any{s.cfg.Name, token, ms(now)}, &one)
	if err != nil {
		return nil, s.errorf("check lease: %w", err)
	}
	if !leader {
		return nil, outbox.ErrNotLeader
	}
	held := make(map[string]bool)
	var out []outbox.Row
	after := int64(-1)
	page := n
	for len(out) < n {
		rows, err := s.rows(ctx, c, `SELECT `+rowCols+` FROM `+s.t+` WHERE status = 'pending' AND seq > $1 ORDER BY seq LIMIT $2`, after, page)
		if err != nil {
			return nil, s.errorf("claim: %w", err)
		}
		for _, r := range rows {
			after = int64(r.Seq)
			k := r.OrderingKey()
			if len(out) == n || held[k] {
				continue
			}
			if r.NextAt.After(now) {
				held[k] = true
				continue
			}
			out = append(out, r)
		}
		if len(rows) < page {
			break
		}
	}
	return out, nil
}

func (s *Store) rows(ctx context.Context, c sqlconn.Conn, q string, args ...any) ([]outbox.Row, error) {
	rs, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []outbox.Row
	for rs.Next() {
		var (
			r                        outbox.Row
			headers                  *string
			status                   string
			nextAt, sentAt, seq, tok int64
			attempts                 int64
			payload                  []byte
		)
		if err := rs.Scan(&r.ID, &r.Topic, &r.Key, &headers, &payload, &r.TS, &status, &attempts, &r.LastError, &nextAt, &tok, &sentAt, &seq); err != nil {
			return nil, err
		}
		if headers != nil && *headers != "" {
			if err := json.Unmarshal([]byte(*headers), &r.Headers); err != nil {
				return nil, fmt.Errorf("row %q: headers: %w", r.ID, err)
			}
		}
		r.Payload = payload
		r.Status, r.Attempts, r.Token, r.Seq = outbox.Status(status), int(attempts), tok, uint64(seq)
		r.NextAt = time.UnixMilli(nextAt)
		if sentAt > 0 {
			r.SentAt = time.UnixMilli(sentAt)
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

// fence matches rows still pending that no newer drainer marked.
const fence = `status = 'pending' AND token <= $1`

// MarkSent implements [outbox.Store]. Rows that no longer carry token are
// left alone and reported as ErrStaleClaim; the others are marked.
func (s *Store) MarkSent(ctx context.Context, token int64, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return err
	}
	// The numbers are written into the statement, so that its only
	// arguments are the ids.
	tok, now := strconv.FormatInt(token, 10), strconv.FormatInt(ms(s.cfg.Clock.Now()), 10)
	var matched int64
	for chunk := range slices.Chunk(ids, batch) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		n, err := c.Exec(ctx, `UPDATE `+s.t+` SET status = 'sent', token = `+tok+`, sent_at = `+now+`
			WHERE id IN (`+s.d.Params(1, len(chunk))+`) AND status = 'pending' AND token <= `+tok, args...)
		if err != nil {
			return s.errorf("mark sent: %w", err)
		}
		matched += n
	}
	if int(matched) < len(ids) {
		return fmt.Errorf("%w: %d of %d rows", outbox.ErrStaleClaim, len(ids)-int(matched), len(ids))
	}
	return nil
}

// MarkRetry implements [outbox.Store].
func (s *Store) MarkRetry(ctx context.Context, token int64, r outbox.Retry) error {
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return err
	}
	status := outbox.StatusPending
	if r.Final {
		status = outbox.StatusFailed
	}
	var next int64
	if !r.Next.IsZero() {
		next = msUp(r.Next)
	}
	n, err := c.Exec(ctx, `UPDATE `+s.t+` SET token = $1, attempts = attempts + 1, last_error = $2, next_at = $3, status = $4
		WHERE id = $5 AND `+fence, token, r.Err, next, string(status), r.ID)
	if err != nil {
		return s.errorf("mark retry: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: row %q", outbox.ErrStaleClaim, r.ID)
	}
	return nil
}

// DeleteSent implements [outbox.Store]: it deletes up to limit sent rows,
// oldest first.
func (s *Store) DeleteSent(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, invalid("limit", "%d, want at least 1", limit)
	}
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return 0, err
	}
	n, err := c.Exec(ctx, `DELETE FROM `+s.t+` WHERE seq IN (
		SELECT seq FROM `+s.t+` WHERE status = 'sent' AND sent_at < $1 ORDER BY sent_at LIMIT $2)`, ms(before), limit)
	if err != nil {
		return 0, s.errorf("delete sent: %w", err)
	}
	return int(n), nil
}

// Stats implements [outbox.Store]: three counts on the (status, seq)
// index.
func (s *Store) Stats(ctx context.Context) (outbox.Stats, error) {
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return outbox.Stats{}, err
	}
	var st outbox.Stats
	count := func(status outbox.Status) string {
		return `(SELECT COUNT(*) FROM ` + s.t + ` WHERE status = '` + string(status) + `')`
	}
	_, err = sqlconn.QueryRow(ctx, c, `SELECT `+count(outbox.StatusPending)+`, `+count(outbox.StatusSent)+`, `+count(outbox.StatusFailed), nil,
		&st.Pending, &st.Sent, &st.Failed)
	if err != nil {
		return outbox.Stats{}, s.errorf("stats: %w", err)
	}
	return st, nil
}

// Row returns the row with the given id.
func (s *Store) Row(ctx context.Context, id string) (outbox.Row, error) {
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return outbox.Row{}, err
	}
	rows, err := s.rows(ctx, c, `SELECT `+rowCols+` FROM `+s.t+` WHERE id = $1`, id)
	if err != nil {
		return outbox.Row{}, s.errorf("row %q: %w", id, err)
	}
	if len(rows) == 0 {
		return outbox.Row{}, fmt.Errorf("outbox: row %q: not found", id)
	}
	return rows[0], nil
}
