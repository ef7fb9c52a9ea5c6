package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/sqlstore"
)

// Config configures a [Store]. The zero value of every field means its
// default.
type Config struct {
	// Clock tells the time of heartbeats and partition leases (default the
	// system clock).
	Clock clock.Clock
	// MaxBatch bounds the records of one group-commit transaction (default
	// 1000). A single Append larger than it is written whole.
	MaxBatch int
	// PollInterval is how often a watched topic is checked for records
	// that other processes appended to the file (default 200ms). Appends
	// through this store wake watchers at once.
	PollInterval time.Duration
	// WriteTimeout bounds one group-commit transaction (default 30s).
	WriteTimeout time.Duration
	// BusyTimeout is how long a write waits for another process that holds
	// the file's write lock (default 10s).
	BusyTimeout time.Duration
	// Synchronous is SQLite's synchronous setting: "FULL" (the default)
	// syncs the write-ahead log at every commit, so an acknowledged
	// publish survives a power loss; "NORMAL" syncs at checkpoints only:
	// a crash of the process loses nothing, a power loss may lose the last
	// commits.
	Synchronous string
	// ReadConns bounds the connections that read (default 4).
	ReadConns int
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Store is an [event.Store] in a SQLite file (also [event.CursorStore],
// [event.LeaseStore], [event.LeaseRenewer], [event.GroupStateStore],
// [event.Notifier], [event.KeyStore], [event.Pruner], [event.Lister],
// [event.TopicStore] and [event.GroupStore]).
type Store struct {
	*sqlstore.Store
	w, r *sql.DB
	path string
}

var (
	_ event.Store        = (*Store)(nil)
	_ event.LeaseRenewer = (*Store)(nil)
)

// Schema is the SQL that creates the store's tables if they are absent;
// [Open] runs it.
var Schema = sqlstore.Tables(sqlstore.Types{Int64: "INTEGER", Bytes: "BLOB"})

// Open opens (creating if absent) the store in the SQLite file at path,
// in WAL mode. Several processes may open the same file.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	db, err := OpenDB(path, cfg)
	if err != nil {
		return nil, err
	}
	w, r := db.Write, db.Read
	if err := migrate(ctx, w, clock.Or(cfg.Clock).Now()); err != nil {
		_ = w.Close()
		_ = r.Close()
		return nil, err
	}
	// No FenceLock: the writer's transactions take the write lock at
	// BEGIN (_txlock=immediate), which shuts out every other writer; so
	// concurrent renewals can share one transaction and one sync
	// (BatchRenewals).
	core, err := sqlstore.New(ctx, w, r, sqlstore.Dialect{Name: "sqlitestore", Schema: Schema, AnonymousParams: true,
		InsertRows: sqlstore.SQLiteInsertRows, BatchRenewals: true}, sqlstore.Config{
		Clock: cfg.Clock, MaxBatch: cfg.MaxBatch, PollInterval: cfg.PollInterval,
		WriteTimeout: cfg.WriteTimeout, Logger: cfg.Logger,
	})
	if err != nil {
		_ = w.Close()
		_ = r.Close()
		return nil, err
	}
	return &Store{Store: core, w: w, r: r, path: path}, nil
}

// DB is a SQLite file opened as the store opens it, by [OpenDB], for a
// program that shares the file with the outbox, dedupe, transactions or
// tables of its own: Write is the one writing connection (its
// transactions take the write lock at BEGIN), for every write and every
// transaction; Read is a pool of read-only connections, for queries that
// need not see the writer's uncommitted rows. Both are in WAL mode with
// the Config's busy timeout and synchronous setting.
//
// The caller of OpenDB owns both pools and closes them with [DB.Close]
// (closing Write alone leaves the readers' connections open).
type DB struct {
	Write *sql.DB
	Read  *sql.DB
}

// Close closes both pools.
func (db *DB) Close() error { return errors.Join(db.Write.Close(), db.Read.Close()) }

// OpenDB opens the SQLite file at path as the store does (see [DB]). The
// caller closes the DB.
func OpenDB(path string, cfg Config) (*DB, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("%w: sqlitestore: path %q: want a file name without '?' or '#' (a store in memory is event.NewMemoryStore)", event.ErrInvalid, path)
	}
	busy := cfg.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	sync := strings.ToUpper(cfg.Synchronous)
	switch sync {
	case "":
		sync = "FULL"
	case "FULL", "NORMAL", "EXTRA":
	default:
		return nil, fmt.Errorf("%w: sqlitestore: Synchronous %q: want FULL, NORMAL or EXTRA", event.ErrInvalid, cfg.Synchronous)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	w := openDB(dsn)
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := w.Ping(); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlitestore: open %q: %w", path, err)
	}
	rq := url.Values{}
	rq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	rq.Add("_pragma", "query_only(1)")
	r := openDB("file:" + (&url.URL{Path: path}).EscapedPath() + "?" + rq.Encode())
	n := cfg.ReadConns
	if n <= 0 {
		n = 4
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	return &DB{Write: w, Read: r}, nil
}

// DB returns the database the store writes through (one connection). A
// transaction begun on it takes the write lock at BEGIN; hold it briefly,
// the store's appends wait for it.
func (s *Store) DB() *sql.DB { return s.w }

// Path returns the file the store is in.
func (s *Store) Path() string { return s.path }

// Close stops the store and closes its connections. Appends in flight fail
// with [event.ErrClosed]. The context is not used: closing does not wait
// for the database.
func (s *Store) Close(ctx context.Context) error {
	err := s.Store.Close()
	if e := s.w.Close(); err == nil {
		err = e
	}
	if e := s.r.Close(); err == nil {
		err = e
	}
	return err
}

// migrate brings a file made by an older version up to the schema, in one
// transaction: it takes the write lock at BEGIN, so processes opening the
// same old file together do not both add a column. A new file (no tables
// yet) is left to [Schema]. now is the time of the migration (the store's
// clock).
func migrate(ctx context.Context, w *sql.DB, now time.Time) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	defer tx.Rollback()
	if err := addEventCounts(ctx, tx); err != nil {
		return err
	}
	if err := addLeaseTokens(ctx, tx); err != nil {
		return err
	}
	if err := addTopicPartitions(ctx, tx); err != nil {
		return err
	}
	if err := addGroupSettings(ctx, tx); err != nil {
		return err
	}
	if err := addCursorTimes(ctx, tx, now); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	return nil
}

// hasColumn reports whether table exists and whether it has col.
func hasColumn(ctx context.Context, tx *sql.Tx, table, col string) (exists, has bool, err error) {
	var cols, n int
	err = tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(name = $1), 0) FROM pragma_table_info($2)`, col, table).Scan(&cols, &n)
	if err != nil {
		return false, false, fmt.Errorf("sqlitestore: read the schema: %w", err)
	}
	return cols > 0, n > 0, nil
}

// addEventCounts gives a file made before promlib_topics counted its
// records (events) or their bytes (bytes) the missing column, counted once
// from the records it holds.
func addEventCounts(ctx context.Context, tx *sql.Tx) error {
	for _, c := range []struct{ col, count string }{
		{"events", `COUNT(*)`},
		{"bytes", `COALESCE(SUM(` + sqlstore.RowBytes + `), 0)`},
	} {
		exists, has, err := hasColumn(ctx, tx, "promlib_topics", c.col)
		if err != nil {
			return err
		}
		if !exists || has {
			continue // a new file, or counted already
		}
		for _, stmt := range []string{
			`ALTER TABLE promlib_topics ADD COLUMN ` + c.col + ` INTEGER NOT NULL DEFAULT 0`,
			`UPDATE promlib_topics SET ` + c.col + ` = (SELECT ` + c.count + ` FROM promlib_events WHERE promlib_events.topic = promlib_topics.topic)`,
		} {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("sqlitestore: add the %s count: %w", c.col, err)
			}
		}
	}
	return nil
}

// addLeaseTokens gives a file made before leases had tokens the token
// column of promlib_leases. Its rows get token 0, which no fence matches
// (granted tokens start at 1): the next grant of each partition, even to
// the member the row names, raises the token to a real one.
func addLeaseTokens(ctx context.Context, tx *sql.Tx) error {
	exists, has, err := hasColumn(ctx, tx, "promlib_leases", "token")
	if err != nil || !exists || has {
		return err
	}
	if _, err := tx.ExecContext(ctx, `ALTER TABLE promlib_leases ADD COLUMN token INTEGER NOT NULL DEFAULT 0`); err != nil {
		return fmt.Errorf("sqlitestore: add the lease token: %w", err)
	}
	return nil
}

// addTopicPartitions gives a file made before topics had settings the
// partitions column of promlib_topics. Its rows get 0, no settings: a
// topic's count is set by the first CreateTopic, from the partitions its
// records and cursors show (see [sqlstore.Store.CreateTopic]).
func addTopicPartitions(ctx context.Context, tx *sql.Tx) error {
	exists, has, err := hasColumn(ctx, tx, "promlib_topics", "partitions")
	if err != nil || !exists || has {
		return err
	}
	if _, err := tx.ExecContext(ctx, `ALTER TABLE promlib_topics ADD COLUMN partitions INTEGER NOT NULL DEFAULT 0`); err != nil {
		return fmt.Errorf("sqlitestore: add the topics' partitions: %w", err)
	}
	return nil
}

// addGroupSettings gives a file made before groups had settings the
// config and at columns of promlib_groups. Its rows get an empty config
// and at 0, no settings: a group's are created by its first CreateGroup (a
// Bus's Subscribe), see [sqlstore.Store.CreateGroup].
func addGroupSettings(ctx context.Context, tx *sql.Tx) error {
	for _, c := range []struct{ col, def string }{
		{"config", `TEXT NOT NULL DEFAULT ''`},
		{"at", `INTEGER NOT NULL DEFAULT 0`},
	} {
		exists, has, err := hasColumn(ctx, tx, "promlib_groups", c.col)
		if err != nil {
			return err
		}
		if !exists || has {
			continue
		}
		if _, err := tx.ExecContext(ctx, `ALTER TABLE promlib_groups ADD COLUMN `+c.col+` `+c.def); err != nil {
			return fmt.Errorf("sqlitestore: add the groups' %s: %w", c.col, err)
		}
	}
	return nil
}

// addCursorTimes gives a file made before cursors recorded the time of
// their last change the at column of promlib_cursors, set to the time of
// the migration in every row: a database of an older release counts its
// migration as activity of its groups (their LastActive), so that none
// is expired for having been idle before it.
func addCursorTimes(ctx context.Context, tx *sql.Tx, now time.Time) error {
	exists, has, err := hasColumn(ctx, tx, "promlib_cursors", "at")
	if err != nil || !exists || has {
		return err
	}
	if _, err := tx.ExecContext(ctx, `ALTER TABLE promlib_cursors ADD COLUMN at INTEGER NOT NULL DEFAULT 0`); err != nil {
		return fmt.Errorf("sqlitestore: add the cursors' times: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE promlib_cursors SET at = $1`, now.UnixNano()); err != nil {
		return fmt.Errorf("sqlitestore: add the cursors' times: %w", err)
	}
	return nil
}
