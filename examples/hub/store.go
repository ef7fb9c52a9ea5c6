package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/examples/internal/cli"
	"github.com/promethean/promlib/outbox/pgoutbox"
	"github.com/promethean/promlib/outbox/sqliteoutbox"
	"github.com/promethean/promlib/storeurl"
)

// storeCloseTimeout bounds closing the store at shutdown.
const storeCloseTimeout = 10 * time.Second

// defaultSQLiteFile is the store of a hub started with no -store and no
// MONGO_URL: a SQLite file in the working directory, so that events
// survive a restart with no setup.
const defaultSQLiteFile = storeurl.DefaultSQLiteFile

// storeUsage lists the values of -store.
const storeUsage = storeurl.Usage

// storeSpec is where the hub keeps its events: the parsed -store flag, or
// MONGO_URL, or the default SQLite file.
type storeSpec struct {
	loc storeurl.Location
	// from names where the choice came from in messages: "-store",
	// "MONGO_URL" or "default". URLs are never printed: they may hold
	// credentials.
	from string
}

// parseStore reads the -store flag (empty when not given), in the grammar
// of package storeurl. Without it, a set MONGO_URL selects MongoDB, and
// otherwise the SQLite file promlib.db in the working directory is the
// store. A bad value is a [cli.UsageError] naming the problem.
func parseStore(flagValue string, flagGiven bool, getenv func(string) string) (storeSpec, error) {
	if !flagGiven {
		if u := getenv("MONGO_URL"); u != "" {
			return storeSpec{loc: storeurl.Location{Kind: storeurl.KindMongoDB, URL: u}, from: "MONGO_URL"}, nil
		}
		return storeSpec{loc: storeurl.Location{Kind: storeurl.KindSQLite, Path: defaultSQLiteFile}, from: "default"}, nil
	}
	loc, err := storeurl.Parse(flagValue)
	if err != nil {
		var pe *storeurl.ParseError
		if errors.As(err, &pe) {
			return storeSpec{}, cli.Usagef("-store: %s", pe.Msg)
		}
		return storeSpec{}, cli.Usagef("-store: %v", err)
	}
	return storeSpec{loc: loc, from: "-store"}, nil
}

// hubStore is the opened store of the hub.
type hubStore struct {
	store event.Store
	// name is the store's name in logs ("SQLite", "PostgreSQL", ...).
	name  string
	close func()
	// outbox opens the outbox beside the store's events, where its
	// drainer runs: it returns the store, where it is (for the log) and a
	// function that closes what it opened. Nil in memory.
	outbox func(ctx context.Context) (drainable, string, func(), error)
}

// openOutbox opens the outbox of the store, creating its tables or
// indexes if they are absent.
func (hs *hubStore) openOutbox(ctx context.Context) (drainable, string, func(), error) {
	if hs.outbox == nil {
		return nil, "", nil, fmt.Errorf("the %s store has no outbox", hs.name)
	}
	return hs.outbox(ctx)
}

// openStore opens the store of the hub's events, cursors and leases, with
// its outbox beside them (storeurl: tables and indexes are created if
// absent). PG_SCHEMA and MONGO_DB name the schema and the database.
func openStore(ctx context.Context, spec storeSpec, getenv func(string) string, log *slog.Logger) (*hubStore, error) {
	loc, cfg := spec.loc, storeurl.Config{Logger: log}
	var where, outboxAt string
	switch loc.Kind {
	case storeurl.KindMemory:
		db, err := loc.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		log.Info("events are kept in memory: they are lost when the hub stops (-store sqlite:PATH keeps them in a file)")
		// The memory outbox would be the hub's alone: no service can add
		// rows to it, so no drainer runs.
		return &hubStore{store: db.Store(), name: "memory", close: func() {}}, nil
	case storeurl.KindSQLite:
		abs, err := filepath.Abs(loc.Path)
		if err != nil {
			return nil, fmt.Errorf("SQLite store %s: %w", loc.Path, err)
		}
		loc.Path = abs
		where = fmt.Sprintf("SQLite store %s (%s)", abs, spec.from)
		outboxAt = "table " + sqliteoutbox.DefaultTable
	case storeurl.KindPostgres:
		schema := getenv("PG_SCHEMA")
		if schema == "" {
			schema = pgstore.DefaultSchema
		}
		cfg.Postgres.Schema = schema
		where = fmt.Sprintf("PostgreSQL store (%s, PG_SCHEMA %q)", spec.from, schema)
		outboxAt = "table " + pgoutbox.DefaultTable + " in schema " + schema
	case storeurl.KindMongoDB:
		dbName := getenv("MONGO_DB")
		if dbName == "" {
			dbName = mongostore.DefaultDatabase
		}
		cfg.MongoDB.Database = dbName
		where = fmt.Sprintf("MongoDB store (%s, MONGO_DB %q)", spec.from, dbName)
		outboxAt = "collection outbox of database " + dbName
	default:
		return nil, fmt.Errorf("store: unknown kind %q", loc.Kind)
	}
	db, err := loc.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	// URLs are not logged: they may hold credentials.
	switch loc.Kind {
	case storeurl.KindSQLite:
		msg := "events are kept in a SQLite file"
		if spec.from == "default" {
			msg += " (the default without -store or MONGO_URL)"
		}
		log.Info(msg, "file", loc.Path)
	case storeurl.KindPostgres:
		log.Info("events are kept in PostgreSQL", "schema", cfg.Postgres.Schema)
	case storeurl.KindMongoDB:
		log.Info("events are kept in MongoDB", "database", cfg.MongoDB.Database)
	}
	name := loc.Kind.Name()
	return &hubStore{store: db.Store(), name: name, close: closer(name, db.Close, log),
		outbox: func(context.Context) (drainable, string, func(), error) {
			// The outbox is beside the events, in the same file, schema
			// or database, opened with them.
			return db.Outbox(), outboxAt, func() {}, nil
		}}, nil
}

// closer returns the function that closes a store at shutdown, logging
// a failure.
func closer(name string, close func(context.Context) error, log *slog.Logger) func() {
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeCloseTimeout)
		defer cancel()
		if err := close(ctx); err != nil {
			log.Warn("closing the "+name+" store", "err", err)
		}
	}
}
