package pgdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/dedupe/pgdedupe"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/outbox/pgoutbox"
	"github.com/promethean/promlib/projector/sqltable"
	"github.com/promethean/promlib/txn/pgtxn"
)

// Config configures [Open]. URL or Pool is required; the zero value of
// every other field means its default.
type Config struct {
	// URL is the server's, postgres://[user[:password]@]host[:port]/database
	// (or a key=value string), as pgx reads it. With Pool it may be empty:
	// the store then connects with the pool's connection string.
	URL string
	// Pool is the application's pool, used by the outbox, the dedupe
	// store and the runner, so that their writes join the application's
	// transactions; nil opens one on URL. [DB.Close] leaves it open.
	Pool *pgxpool.Pool
	// Schema holds every part's tables, created if absent (default: the
	// current schema of Pool, or "public").
	Schema string
	// Store configures the event store; its Schema is Config.Schema (leave
	// it empty).
	Store pgstore.Config
	// Outbox configures the outbox (its table, its name).
	Outbox pgoutbox.Config
	// Dedupe configures the dedupe store (its table).
	Dedupe pgdedupe.Config
	// Txn configures the transaction runner.
	Txn pgtxn.Config
}

// Validate reports every problem of c, joined; each names its field.
func (c Config) Validate() error {
	var errs []error
	if c.URL == "" && c.Pool == nil {
		errs = append(errs, fmt.Errorf("%w: URL: empty and no Pool, want postgres://[user[:password]@]host[:port]/database", ErrInvalid))
	} else if c.URL != "" {
		if err := CheckURL(c.URL); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Store.Schema != "" && c.Store.Schema != c.Schema {
		errs = append(errs, fmt.Errorf("%w: Store.Schema: %q, set Config.Schema instead (every part uses it)", ErrInvalid, c.Store.Schema))
	}
	if err := c.Txn.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("pgdb: Txn: %w", err))
	}
	return errors.Join(errs...)
}

// CheckURL reports whether pgx reads s as a connection string, with an
// error wrapping [ErrInvalid] that never repeats s's password (pgx's own
// errors may). It does no I/O.
func CheckURL(s string) error {
	var pw string
	if u, err := url.Parse(s); err == nil {
		pw, _ = u.User.Password()
	} else if strings.Contains(s, "://") {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return fmt.Errorf("%w: URL: %v", ErrInvalid, err)
	}
	if _, err := pgx.ParseConfig(s); err != nil {
		msg := err.Error()
		if pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
		return fmt.Errorf("%w: URL: %s", ErrInvalid, msg)
	}
	return nil
}

// DB is a PostgreSQL database opened once, with the parts of promlib in
// one of its schemas.
type DB struct {
	store  *pgstore.Store
	pool   *pgxpool.Pool
	owned  bool // pool was opened by Open
	schema string
	outbox *pgoutbox.Store
	dedupe *pgdedupe.Store
	txn    *pgtxn.Runner

	closeOnce sync.Once
	closeErr  error
}

// Open connects to the database, creates the schema and the tables of the
// event store, the outbox and the dedupe store if they are absent, and
// starts the store's listener. Close the DB when done.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db := &DB{pool: cfg.Pool, schema: cfg.Schema}
	storeURL := cfg.URL
	if cfg.Pool != nil {
		if storeURL == "" {
			storeURL = cfg.Pool.Config().ConnString()
		}
		if db.schema == "" {
			cur, err := currentSchema(ctx, cfg.Pool)
			if err != nil {
				return nil, err
			}
			if cur == "" {
				return nil, fmt.Errorf("%w: Schema: empty, and the pool's search_path names no schema that exists; set one of them", ErrInvalid)
			}
			db.schema = cur
		}
	}
	if db.schema == "" {
		db.schema = pgstore.DefaultSchema
	}
	scfg := cfg.Store
	scfg.Schema = db.schema
	s, err := pgstore.Open(ctx, withoutPoolParams(storeURL), scfg)
	if err != nil {
		return nil, err
	}
	db.store = s
	if err := db.openParts(ctx, cfg); err != nil {
		_ = db.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return db, nil
}

// openParts opens the pool (unless given) and the parts on it, after the
// store created the schema.
func (db *DB) openParts(ctx context.Context, cfg Config) error {
	if db.pool == nil {
		pcfg, err := pgxpool.ParseConfig(cfg.URL)
		if err != nil {
			return fmt.Errorf("%w: URL: %v", ErrInvalid, err)
		}
		pcfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{db.schema}.Sanitize()
		if db.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
			return fmt.Errorf("pgdb: pool: %w", err)
		}
		db.owned = true
	} else {
		cur, err := currentSchema(ctx, db.pool)
		if err != nil {
			return err
		}
		if cur != db.schema {
			return fmt.Errorf("%w: Schema: %q, but the pool's current schema is %q: the outbox and dedupe tables would be apart from the events; give the pool search_path %s", ErrInvalid, db.schema, cur, db.schema)
		}
	}
	var err error
	if db.outbox, err = pgoutbox.New(db.pool, cfg.Outbox); err != nil {
		return fmt.Errorf("pgdb: Outbox: %w", err)
	}
	if err := db.outbox.CreateTables(ctx); err != nil {
		return fmt.Errorf("pgdb: outbox tables: %w", err)
	}
	if db.dedupe, err = pgdedupe.New(db.pool, cfg.Dedupe); err != nil {
		return fmt.Errorf("pgdb: Dedupe: %w", err)
	}
	if err := db.dedupe.CreateTables(ctx); err != nil {
		return fmt.Errorf("pgdb: dedupe table: %w", err)
	}
	if db.txn, err = pgtxn.NewRunner(db.pool, cfg.Txn); err != nil {
		return fmt.Errorf("pgdb: Txn: %w", err)
	}
	return nil
}

// currentSchema returns the pool's current_schema(), "" when its
// search_path names no schema that exists.
func currentSchema(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var cur *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil {
		return "", fmt.Errorf("pgdb: the pool's current schema: %w", err)
	}
	if cur == nil {
		return "", nil
	}
	return *cur, nil
}

// withoutPoolParams drops the pgxpool settings (pool_max_conns, ...) of a
// URL, which the store's connections would send to the server as
// unknown parameters.
func withoutPoolParams(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.RawQuery == "" {
		return s // a key=value string, or a URL pgstore will refuse
	}
	q := u.Query()
	dropped := false
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
			dropped = true
		}
	}
	if !dropped {
		return s
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Store returns the event store; give it to event.NewBus.
func (db *DB) Store() *pgstore.Store { return db.store }

// Outbox returns the outbox, whose Add joins a transaction of [DB.Txn].
func (db *DB) Outbox() *pgoutbox.Store { return db.outbox }

// Dedupe returns the dedupe store, whose MarkDone joins a transaction of
// [DB.Txn] (for dedupe.SubscribeExactlyOnceTx).
func (db *DB) Dedupe() *pgdedupe.Store { return db.dedupe }

// Txn returns the runner of transactions on [DB.Pool]: the writes of the
// outbox, the dedupe store and the application's own statements made with
// the ctx it passes commit together.
func (db *DB) Txn() *pgtxn.Runner { return db.txn }

// Pool returns the pool of the outbox, the dedupe store and the runner.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// SQL returns the event store's pool (database/sql over pgx, in
// [DB.Schema]); changelog tables write through it.
func (db *DB) SQL() *sql.DB { return db.store.DB() }

// Schema returns the schema of every part's tables.
func (db *DB) Schema() string { return db.schema }

// Table returns a changelog table in the schema (see [sqltable]): cfg as
// for sqltable.New, whose DB and Dialect are this database's (left zero,
// or set to the same). Call EnsureTable and Run on it.
func (db *DB) Table(cfg sqltable.Config) (*sqltable.Table, error) {
	if cfg.DB != nil && cfg.DB != db.SQL() {
		return nil, fmt.Errorf("%w: Table: Config.DB is another database; leave it nil", ErrInvalid)
	}
	if cfg.Dialect != 0 && cfg.Dialect != sqltable.Postgres {
		return nil, fmt.Errorf("%w: Table: Config.Dialect is %v; leave it zero", ErrInvalid, cfg.Dialect)
	}
	cfg.DB, cfg.Dialect = db.SQL(), sqltable.Postgres
	return sqltable.New(cfg)
}

// Close stops the store (its listener, its pool) and closes the pool Open
// opened; an application's pool (Config.Pool) stays open. Stop what uses
// the parts (drainers, tables, subscriptions) first. Calls after the
// first return its result.
func (db *DB) Close(ctx context.Context) error {
	db.closeOnce.Do(func() {
		if db.store != nil {
			db.closeErr = db.store.Close(ctx)
		}
		if db.owned {
			db.pool.Close()
		}
	})
	return db.closeErr
}
