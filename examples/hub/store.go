package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/examples/internal/cli"
	"github.com/promethean/promlib/outbox/mongooutbox"
	"github.com/promethean/promlib/outbox/pgoutbox"
	"github.com/promethean/promlib/outbox/sqliteoutbox"
)

// storeCloseTimeout bounds closing the store at shutdown.
const storeCloseTimeout = 10 * time.Second

// defaultSQLiteFile is the store of a hub started with no -store and no
// MONGO_URL: a SQLite file in the working directory, so that events
// survive a restart with no setup.
const defaultSQLiteFile = "promlib.db"

// storeKind is the database of the hub's events.
type storeKind string

const (
	storeMemory   storeKind = "memory"
	storeSQLite   storeKind = "sqlite"
	storePostgres storeKind = "postgres"
	storeMongo    storeKind = "mongo"
)

// storeSpec is where the hub keeps its events: the parsed -store flag, or
// MONGO_URL, or the default SQLite file.
type storeSpec struct {
	kind storeKind
	// path is the SQLite file; url the PostgreSQL or MongoDB URL.
	path, url string
	// from names where the choice came from in messages: "-store",
	// "MONGO_URL" or "default". URLs are never printed: they may hold
	// credentials.
	from string
}

// storeUsage lists the values of -store.
const storeUsage = "memory, sqlite:PATH, postgres://..., postgresql://..., mongodb://... or mongodb+srv://..."

// parseStore reads the -store flag (empty when not given). Without it, a
// set MONGO_URL selects MongoDB, and otherwise the SQLite file
// promlib.db in the working directory is the store. A bad value is a
// [cli.UsageError] naming the problem.
func parseStore(flagValue string, flagGiven bool, getenv func(string) string) (storeSpec, error) {
	if !flagGiven {
		if u := getenv("MONGO_URL"); u != "" {
			return storeSpec{kind: storeMongo, url: u, from: "MONGO_URL"}, nil
		}
		return storeSpec{kind: storeSQLite, path: defaultSQLiteFile, from: "default"}, nil
	}
	v := flagValue
	scheme, rest, hasScheme := strings.Cut(v, ":")
	switch {
	case v == "":
		return storeSpec{}, cli.Usagef("-store: empty, want %s", storeUsage)
	case v == string(storeMemory):
		return storeSpec{kind: storeMemory, from: "-store"}, nil
	case !hasScheme:
		return storeSpec{}, cli.Usagef("-store: %q has no scheme, want %s (a SQLite file is sqlite:%s)", v, storeUsage, v)
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		return parseSQLite(rest)
	case "postgres", "postgresql":
		if !strings.HasPrefix(rest, "//") {
			return storeSpec{}, cli.Usagef("-store: a PostgreSQL store is a URL, %s://[user[:password]@]host[:port]/database", scheme)
		}
		if err := checkPostgresURL(v); err != nil {
			return storeSpec{}, err
		}
		return storeSpec{kind: storePostgres, url: v, from: "-store"}, nil
	case "mongodb", "mongodb+srv":
		if !strings.HasPrefix(rest, "//") || len(rest) == 2 {
			return storeSpec{}, cli.Usagef("-store: a MongoDB store is a URL, %s://host[:port][/...]", scheme)
		}
		return storeSpec{kind: storeMongo, url: v, from: "-store"}, nil
	}
	// The scheme alone: a URL's rest may hold a password.
	return storeSpec{}, cli.Usagef("-store: unknown scheme %q, want %s", scheme, storeUsage)
}

// checkPostgresURL checks a PostgreSQL URL as the driver will read it;
// its error never repeats the URL's password.
func checkPostgresURL(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return cli.Usagef("-store: bad PostgreSQL URL: %v", err)
	}
	if _, err := pgx.ParseConfig(v); err != nil {
		msg := err.Error()
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
		return cli.Usagef("-store: bad PostgreSQL URL: %s", msg)
	}
	return nil
}

// parseSQLite checks the PATH of sqlite:PATH.
func parseSQLite(path string) (storeSpec, error) {
	switch {
	case path == "":
		return storeSpec{}, cli.Usagef("-store: sqlite: with an empty path, want sqlite:PATH such as sqlite:%s", defaultSQLiteFile)
	case path == ":memory:":
		return storeSpec{}, cli.Usagef("-store: sqlite::memory: is not kept anywhere; use -store memory for a store in memory")
	case strings.HasPrefix(path, "//"):
		return storeSpec{}, cli.Usagef("-store: sqlite:%s: want sqlite:PATH, a file name (sqlite:/var/lib/hub/events.db, sqlite:%s)", path, defaultSQLiteFile)
	case strings.ContainsAny(path, "?#"):
		return storeSpec{}, cli.Usagef("-store: sqlite:%s: the path may not hold '?' or '#' (SQLite options are the hub's)", path)
	}
	return storeSpec{kind: storeSQLite, path: path, from: "-store"}, nil
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

// openStore opens the store of the hub's events, cursors and leases.
func openStore(ctx context.Context, spec storeSpec, getenv func(string) string, log *slog.Logger) (*hubStore, error) {
	switch spec.kind {
	case storeMemory:
		log.Info("events are kept in memory: they are lost when the hub stops (-store sqlite:PATH keeps them in a file)")
		return &hubStore{store: event.NewMemoryStore(), name: "memory", close: func() {}}, nil
	case storeSQLite:
		return openSQLite(ctx, spec, log)
	case storePostgres:
		return openPostgres(ctx, spec, getenv, log)
	case storeMongo:
		return openMongo(ctx, spec, getenv, log)
	}
	return nil, fmt.Errorf("store: unknown kind %q", spec.kind)
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

func openSQLite(ctx context.Context, spec storeSpec, log *slog.Logger) (*hubStore, error) {
	abs, err := filepath.Abs(spec.path)
	if err != nil {
		return nil, fmt.Errorf("SQLite store %s: %w", spec.path, err)
	}
	// SQLite's own message for these is "unable to open database file".
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("SQLite store %s (%s): is a directory, want a file name in it", abs, spec.from)
	}
	if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("SQLite store %s (%s): the directory %s does not exist", abs, spec.from, filepath.Dir(abs))
	}
	s, err := sqlitestore.Open(ctx, abs, sqlitestore.Config{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("SQLite store %s (%s): %w", abs, spec.from, err)
	}
	msg := "events are kept in a SQLite file"
	if spec.from == "default" {
		msg += " (the default without -store or MONGO_URL)"
	}
	log.Info(msg, "file", abs)
	return &hubStore{store: s, name: "SQLite", close: closer("SQLite", s.Close, log),
		outbox: func(ctx context.Context) (drainable, string, func(), error) {
			// The outbox's table is in the store's file, written through
			// its one writing connection.
			o, err := sqliteoutbox.New(s.DB(), sqliteoutbox.Config{})
			if err != nil {
				return nil, "", nil, err
			}
			if err := o.CreateTables(ctx); err != nil {
				return nil, "", nil, fmt.Errorf("create tables: %w", err)
			}
			return o, "table " + sqliteoutbox.DefaultTable, func() {}, nil
		}}, nil
}

func openPostgres(ctx context.Context, spec storeSpec, getenv func(string) string, log *slog.Logger) (*hubStore, error) {
	schema := getenv("PG_SCHEMA")
	if schema == "" {
		schema = pgstore.DefaultSchema
	}
	s, err := pgstore.Open(ctx, spec.url, pgstore.Config{Schema: schema, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL store (-store, PG_SCHEMA %q): %w", schema, err)
	}
	// The URL is not logged: it may hold credentials.
	log.Info("events are kept in PostgreSQL", "schema", schema)
	return &hubStore{store: s, name: "PostgreSQL", close: closer("PostgreSQL", s.Close, log),
		outbox: func(ctx context.Context) (drainable, string, func(), error) {
			// The outbox takes a pgx pool of its own, in the same schema.
			cfg, err := pgxpool.ParseConfig(spec.url)
			if err != nil {
				return nil, "", nil, err
			}
			cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				return nil, "", nil, err
			}
			o, err := pgoutbox.New(pool, pgoutbox.Config{})
			if err == nil {
				err = o.CreateTables(ctx)
			}
			if err != nil {
				pool.Close()
				return nil, "", nil, fmt.Errorf("create tables: %w", err)
			}
			return o, "table " + pgoutbox.DefaultTable + " in schema " + schema, pool.Close, nil
		}}, nil
}

func openMongo(ctx context.Context, spec storeSpec, getenv func(string) string, log *slog.Logger) (*hubStore, error) {
	dbName := getenv("MONGO_DB")
	if dbName == "" {
		dbName = mongostore.DefaultDatabase
	}
	where := fmt.Sprintf("MongoDB store (%s, MONGO_DB %q)", spec.from, dbName)
	s, err := mongostore.Connect(ctx, spec.url, mongostore.Config{Database: dbName, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	closeStore := closer("MongoDB", s.Close, log)
	if err := s.EnsureIndexes(ctx); err != nil {
		closeStore()
		return nil, fmt.Errorf("%s: creating indexes: %w", where, err)
	}
	// The URL is not logged: it may hold credentials.
	log.Info("events are kept in MongoDB", "database", dbName)
	return &hubStore{store: s, name: "MongoDB", close: closeStore,
		outbox: func(ctx context.Context) (drainable, string, func(), error) {
			o, err := mongooutbox.New(s.Database(), mongooutbox.Config{})
			if err != nil {
				return nil, "", nil, err
			}
			if _, err := o.EnsureIndexes(ctx); err != nil {
				return nil, "", nil, fmt.Errorf("indexes: %w", err)
			}
			return o, "collection outbox of database " + dbName, func() {}, nil
		}}, nil
}
