package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/sqlstore"
)

// Defaults of [Config].
const (
	DefaultSchema       = "public"
	DefaultMaxConns     = 16
	DefaultPollInterval = time.Second
)

// Config configures a [Store]. The zero value of every field means its
// default.
type Config struct {
	// Schema holds the store's tables (default "public"); it is created if
	// absent. Several stores can share a database in separate schemas.
	Schema string
	// Clock tells the time of heartbeats and partition leases (default the
	// system clock). Processes sharing a store need clocks that agree.
	Clock clock.Clock
	// MaxBatch bounds the records of one group-commit transaction (default
	// 1000). A single Append larger than it is written whole.
	MaxBatch int
	// MaxConns bounds the connections of the store's pool (default 16),
	// besides the one that listens.
	MaxConns int
	// PollInterval is how often a watched topic is checked for records
	// that other processes appended, in case a notification was missed
	// (default 1s). Appends anywhere wake watchers through LISTEN/NOTIFY.
	PollInterval time.Duration
	// WriteTimeout bounds one group-commit transaction (default 30s).
	WriteTimeout time.Duration
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Store is an [event.Store] in PostgreSQL (also [event.CursorStore],
// [event.LeaseStore], [event.LeaseRenewer], [event.GroupStateStore],
// [event.Notifier], [event.KeyStore], [event.Pruner], [event.Lister],
// [event.TopicStore] and [event.GroupStore]).
type Store struct {
	*sqlstore.Store
	db      *sql.DB
	connCfg *pgx.ConnConfig
	channel string
}

var (
	_ event.Store        = (*Store)(nil)
	_ event.LeaseRenewer = (*Store)(nil)
)

// schema returns the DDL of the tables in the current schema; now is the
// time of a migration (Unix ns of the store's clock).
func schema(now int64) []string {
	return append(sqlstore.Tables(sqlstore.Types{Int64: "BIGINT", Bytes: "BYTEA"}),
		// A database made before promlib_topics counted bytes gets the
		// column, counted once from the records it holds.
		`DO $$
		BEGIN
			IF NOT EXISTS (SELECT 1 FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = 'promlib_topics' AND column_name = 'bytes') THEN
				ALTER TABLE promlib_topics ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
				UPDATE promlib_topics SET bytes = (SELECT COALESCE(SUM(`+sqlstore.RowBytes+`), 0)
					FROM promlib_events WHERE promlib_events.topic = promlib_topics.topic);
			END IF;
		END $$`,
		// A database made before leases had tokens gets the column. Its
		// rows get token 0, which no fence matches (granted tokens start
		// at 1): the next grant of each partition raises it.
		`DO $$
		BEGIN
			IF NOT EXISTS (SELECT 1 FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = 'promlib_leases' AND column_name = 'token') THEN
				ALTER TABLE promlib_leases ADD COLUMN token BIGINT NOT NULL DEFAULT 0;
			END IF;
		END $$`,
		// A database made before topics had settings gets the partitions
		// column. Its rows get 0, no settings: a topic's count is set by
		// the first CreateTopic, from the partitions its records and
		// cursors show (see sqlstore.Store.CreateTopic).
		`DO $$
		BEGIN
			IF NOT EXISTS (SELECT 1 FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = 'promlib_topics' AND column_name = 'partitions') THEN
				ALTER TABLE promlib_topics ADD COLUMN partitions BIGINT NOT NULL DEFAULT 0;
			END IF;
		END $$`,
		// A database made before groups had settings gets the config and
		// at columns of promlib_groups. Its rows get '' and 0, no
		// settings: a group's are created by its first CreateGroup (a
		// Bus's Subscribe, see sqlstore.Store.CreateGroup).
		`DO $$
		BEGIN
			IF NOT EXISTS (SELECT 1 FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = 'promlib_groups' AND column_name = 'config') THEN
				ALTER TABLE promlib_groups ADD COLUMN config TEXT NOT NULL DEFAULT '';
			END IF;
			IF NOT EXISTS (SELECT 1 FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = 'promlib_groups' AND column_name = 'at') THEN
				ALTER TABLE promlib_groups ADD COLUMN at BIGINT NOT NULL DEFAULT 0;
			END IF;
		END $$`,
		// A database made before cursors recorded the time of their last
		// change gets the at column of promlib_cursors, with the time of
		// the migration in every row: a database of an older release
		// counts its migration as activity of its groups (LastActive), so
		// that none is expired for having been idle before it. The column
		// is added with the time as its default, which PostgreSQL keeps
		// in the catalog for the rows there are (no rewrite of the
		// table), and the default is then set to 0, as in a new table.
		`DO $$
		BEGIN
			IF NOT EXISTS (SELECT 1 FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = 'promlib_cursors' AND column_name = 'at') THEN
				ALTER TABLE promlib_cursors ADD COLUMN at BIGINT NOT NULL DEFAULT `+strconv.FormatInt(now, 10)+`;
				ALTER TABLE promlib_cursors ALTER COLUMN at SET DEFAULT 0;
			END IF;
		END $$`,
	)
}

// Open connects to the PostgreSQL server at url, creates the schema and
// the tables if they are absent, and starts listening for the appends of
// other processes.
func Open(ctx context.Context, url string, cfg Config) (*Store, error) {
	db, connCfg, err := OpenDB(ctx, url, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	s := &Store{db: db, connCfg: connCfg, channel: channel(cfg.Schema)}
	core, err := sqlstore.New(ctx, db, db, sqlstore.Dialect{
		Name: "pgstore", Notify: notifyExpr(s.channel), RecordTypes: recordTypes, Columns: columns,
		FenceLock: ` FOR SHARE`, GroupLock: ` FOR KEY SHARE`, RowLock: ` FOR UPDATE`,
	}, sqlstore.Config{
		Clock: cfg.Clock, MaxBatch: cfg.MaxBatch, PollInterval: cfg.PollInterval,
		WriteTimeout: cfg.WriteTimeout, Logger: cfg.Logger,
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.Store = core
	ready := make(chan struct{})
	core.WaitGroup().Add(1)
	go s.listen(ready)
	select {
	case <-ready:
	case <-ctx.Done():
	}
	return s, nil
}

// OpenDB connects to the PostgreSQL server at url as the store does (a
// pool whose connections use cfg.Schema) and creates the schema and the
// store's tables if they are absent. Open calls it.
func OpenDB(ctx context.Context, url string, cfg Config) (*sql.DB, *pgx.ConnConfig, error) {
	connCfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: pgstore: url: %v", event.ErrInvalid, err)
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	connCfg.RuntimeParams["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	db := stdlib.OpenDB(*connCfg)
	n := cfg.MaxConns
	if n <= 0 {
		n = DefaultMaxConns
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := createSchema(ctx, db, cfg.Schema, clock.Or(cfg.Clock).Now().UnixNano()); err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return db, connCfg, nil
}

// createSchema creates the schema and tables in one transaction under an
// advisory lock, so that processes starting together do not race; now is
// the time of a migration (Unix ns).
func createSchema(ctx context.Context, db *sql.DB, name string, now int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("pgstore: create schema %q: %w", name, err)
	}
	defer tx.Rollback()
	stmts := append([]string{
		`SELECT pg_advisory_xact_lock(7035120811)`,
		`CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{name}.Sanitize(),
	}, schema(now)...)
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("pgstore: create schema %q: %w", name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("pgstore: create schema %q: %w", name, err)
	}
	return nil
}

// channel is the NOTIFY channel of the store in schema (at most 63 bytes,
// the longest identifier).
func channel(schema string) string {
	if schema == "" {
		schema = DefaultSchema
	}
	c := "promlib:" + schema
	if len(c) > 63 {
		c = c[:63]
	}
	return c
}

// notifyExpr is the dialect's Notify: in the statement that advances a
// topic's head, NOTIFY on channel with the payload "HEAD TOPIC" (the new
// head, a space, the topic). PostgreSQL delivers it when the transaction
// commits, so a listener woken by it reads the records; the head lets a
// store skip the notice of its own append (see parseNotice).
// recordTypes are the types of promlib_events' columns of a record, in
// the order of sqlstore's record columns (topic first).
var recordTypes = []string{"text", "bigint", "text", "bigint", "text", "integer", "text", "bytea", "text", "text", "text", "text"}

// columns turns records' arguments, len(recordTypes) per record, into one
// array per column, of the column's type, which pgx sends to the server in
// its binary form (sqlstore.Dialect.Columns). A nil text is NULL.
func columns(args []any) ([]any, error) {
	k := len(recordTypes)
	if len(args)%k != 0 {
		return nil, fmt.Errorf("pgstore: %d record arguments, not a multiple of %d columns", len(args), k)
	}
	n := len(args) / k
	cols := make([]any, k)
	for j, typ := range recordTypes {
		var err error
		switch typ {
		case "text":
			cols[j], err = column(args, j, n, func(v any) (pgtype.Text, bool) {
				if v == nil {
					return pgtype.Text{}, true // NULL
				}
				s, ok := v.(string)
				return pgtype.Text{String: s, Valid: true}, ok
			})
		case "bigint":
			cols[j], err = column(args, j, n, func(v any) (int64, bool) { i, ok := v.(int64); return i, ok })
		case "integer":
			cols[j], err = column(args, j, n, func(v any) (int32, bool) {
				i, ok := v.(int64)
				return int32(i), ok && i == int64(int32(i))
			})
		case "bytea":
			cols[j], err = column(args, j, n, func(v any) ([]byte, bool) { b, ok := v.([]byte); return b, ok })
		default:
			err = fmt.Errorf("pgstore: no array for column type %s", typ)
		}
		if err != nil {
			return nil, err
		}
	}
	return cols, nil
}

// column returns column j of n records' arguments as conv makes its
// values.
func column[T any](args []any, j, n int, conv func(any) (T, bool)) ([]T, error) {
	k := len(recordTypes)
	out := make([]T, n)
	for i := range out {
		v, ok := conv(args[i*k+j])
		if !ok {
			return nil, fmt.Errorf("pgstore: record %d, column %d (%s): %T is not a %s", i, j, recordTypes[j], args[i*k+j], recordTypes[j])
		}
		out[i] = v
	}
	return out, nil
}

func notifyExpr(channel string) string {
	return `(SELECT 0 FROM pg_notify('` + strings.ReplaceAll(channel, "'", "''") + `', promlib_topics.head || ' ' || promlib_topics.topic))`
}

// parseNotice reads the payload of notifyExpr's NOTIFY. A topic has no
// space (event.ValidateTopic), so the first space ends the head.
func parseNotice(payload string) (topic string, head uint64, ok bool) {
	h, topic, ok := strings.Cut(payload, " ")
	if !ok || topic == "" {
		return "", 0, false
	}
	head, err := strconv.ParseUint(h, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return topic, head, true
}

// listen holds a connection that LISTENs on the store's channel and wakes
// the watchers of each topic named, reconnecting after a failure (the
// store's polling covers the gap).
func (s *Store) listen(ready chan struct{}) {
	defer s.WaitGroup().Done()
	ctx := s.Context()
	once := func() {
		select {
		case <-ready:
		default:
			close(ready)
		}
	}
	defer once()
	for backoff := 100 * time.Millisecond; ctx.Err() == nil; backoff = min(2*backoff, 5*time.Second) {
		err := s.listenOnce(ctx, once)
		if ctx.Err() != nil {
			return
		}
		s.Logger().Warn("pgstore: listening for appends failed; polling until it reconnects", "err", err)
		once()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, ready func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.connCfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if topic, head, ok := parseNotice(n.Payload); ok {
			s.Announce(topic, head)
		} else {
			s.Wake(n.Payload) // a bare topic: wake its watchers to read
		}
	}
}

// DB returns the store's pool (database/sql over pgx). Transactions begun
// on it can write the caller's tables beside the store's.
func (s *Store) DB() *sql.DB { return s.db }

// Close stops the store, its listener and its pool. Appends in flight fail
// with [event.ErrClosed].
func (s *Store) Close(ctx context.Context) error {
	err := s.Store.Close()
	if e := s.db.Close(); err == nil {
		err = e
	}
	return err
}
