package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/promethean/promlib/dedupe/sqlitededupe"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/outbox/sqliteoutbox"
	"github.com/promethean/promlib/projector/sqltable"
	"github.com/promethean/promlib/txn/sqltxn"
)

// Config configures [Open]. Path is required; the zero value of every
// other field means its default.
type Config struct {
	// Path is the SQLite file, created if absent; its directory must
	// exist. A file name without '?' or '#' (SQLite's options are the
	// store's).
	Path string
	// Store configures the event store.
	Store sqlitestore.Config
	// Outbox configures the outbox (its table, its name).
	Outbox sqliteoutbox.Config
	// Dedupe configures the dedupe store (its table).
	Dedupe sqlitededupe.Config
	// Txn configures the transaction runner.
	Txn sqltxn.Config
}

// Validate reports every problem of c, joined; each names its field.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.Path == "":
		errs = append(errs, fmt.Errorf("%w: Path: empty, want a file name such as promlib.db", ErrInvalid))
	case c.Path == ":memory:" || strings.HasPrefix(c.Path, "file:"):
		errs = append(errs, fmt.Errorf("%w: Path: %q: want a file name (a store in memory is event.NewMemoryStore)", ErrInvalid, c.Path))
	case strings.ContainsAny(c.Path, "?#"):
		errs = append(errs, fmt.Errorf("%w: Path: %q: may not hold '?' or '#'", ErrInvalid, c.Path))
	}
	if err := c.Txn.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("sqlitedb: Txn: %w", err))
	}
	return errors.Join(errs...)
}

// DB is a SQLite file opened once, with the parts of promlib in it.
type DB struct {
	store  *sqlitestore.Store
	outbox *sqliteoutbox.Store
	dedupe *sqlitededupe.Store
	txn    *sqltxn.Runner

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if absent) the SQLite file cfg.Path and creates the
// tables of the event store, the outbox and the dedupe store in it if they
// are absent. Close the DB when done.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkPath(cfg.Path); err != nil {
		return nil, err
	}
	s, err := sqlitestore.Open(ctx, cfg.Path, cfg.Store)
	if err != nil {
		return nil, err
	}
	db, err := parts(ctx, s, cfg)
	if err != nil {
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return db, nil
}

// checkPath gives the clear error SQLite does not for a path whose
// directory is missing or which is a directory.
func checkPath(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s, want a file name in it", ErrIsDirectory, path)
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s (of %s)", ErrNoDirectory, dir, path)
	}
	return nil
}

// parts makes the outbox, dedupe store and runner on s's writing
// connection and creates their tables.
func parts(ctx context.Context, s *sqlitestore.Store, cfg Config) (*DB, error) {
	o, err := sqliteoutbox.New(s.DB(), cfg.Outbox)
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: Outbox: %w", err)
	}
	if err := o.CreateTables(ctx); err != nil {
		return nil, fmt.Errorf("sqlitedb: outbox tables: %w", err)
	}
	d, err := sqlitededupe.New(s.DB(), cfg.Dedupe)
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: Dedupe: %w", err)
	}
	if err := d.CreateTables(ctx); err != nil {
		return nil, fmt.Errorf("sqlitedb: dedupe table: %w", err)
	}
	tx, err := sqltxn.NewRunner(s.DB(), cfg.Txn)
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: Txn: %w", err)
	}
	return &DB{store: s, outbox: o, dedupe: d, txn: tx}, nil
}

// Store returns the event store; give it to event.NewBus.
func (db *DB) Store() *sqlitestore.Store { return db.store }

// Outbox returns the outbox, whose Add joins a transaction of [DB.Txn].
func (db *DB) Outbox() *sqliteoutbox.Store { return db.outbox }

// Dedupe returns the dedupe store, whose MarkDone joins a transaction of
// [DB.Txn] (for dedupe.SubscribeExactlyOnceTx).
func (db *DB) Dedupe() *sqlitededupe.Store { return db.dedupe }

// Txn returns the runner of transactions on the file: the writes of the
// outbox, the dedupe store and the application's own statements made with
// the ctx it passes commit together.
func (db *DB) Txn() *sqltxn.Runner { return db.txn }

// SQL returns the connection every part writes through (the store's
// writer: one connection whose transactions take the write lock at
// BEGIN). Use it for the application's own tables, or for a schema store
// (schema/sqlschema); hold its transactions briefly.
func (db *DB) SQL() *sql.DB { return db.store.DB() }

// Path returns the file.
func (db *DB) Path() string { return db.store.Path() }

// Table returns a changelog table in the file (see [sqltable]): cfg as
// for sqltable.New, whose DB and Dialect are this file's (left zero, or
// set to the same). Call EnsureTable and Run on it.
func (db *DB) Table(cfg sqltable.Config) (*sqltable.Table, error) {
	if cfg.DB != nil && cfg.DB != db.SQL() {
		return nil, fmt.Errorf("%w: Table: Config.DB is another database; leave it nil", ErrInvalid)
	}
	if cfg.Dialect != 0 && cfg.Dialect != sqltable.SQLite {
		return nil, fmt.Errorf("%w: Table: Config.Dialect is %v; leave it zero", ErrInvalid, cfg.Dialect)
	}
	cfg.DB, cfg.Dialect = db.SQL(), sqltable.SQLite
	return sqltable.New(cfg)
}

// Close stops the store and closes the file's connections; appends in
// flight fail with event.ErrClosed. Stop what uses the parts (drainers,
// tables, subscriptions) first. Calls after the first return its result.
func (db *DB) Close(ctx context.Context) error {
	db.closeOnce.Do(func() { db.closeErr = db.store.Close(ctx) })
	return db.closeErr
}
