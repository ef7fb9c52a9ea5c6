package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/promethean/promlib/examples/internal/cli"
	"github.com/promethean/promlib/storeurl"
)

// parseStore reads -store in the hub's grammar (package storeurl) and
// checks, before anything is opened or created, that a SQLite file can be
// made where it names: its directory exists and the file does not (the
// bench measures a new file and removes it at the end).
func (o *Options) parseStore() error {
	loc, err := storeurl.Parse(o.Store)
	if err != nil {
		var pe *storeurl.ParseError
		if errors.As(err, &pe) {
			return cli.Usagef("-store: %s", pe.Msg)
		}
		return cli.Usagef("-store: %v", err)
	}
	if loc.Kind == storeurl.KindSQLite {
		dir := filepath.Dir(loc.Path)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return cli.Usagef("-store: %s: the directory %s does not exist", loc, dir)
		}
		if _, err := os.Lstat(loc.Path); !errors.Is(err, os.ErrNotExist) {
			return cli.Usagef("-store: %s: the file exists; the bench writes a new file there and removes it at the end", loc)
		}
	}
	o.Location = loc
	return nil
}

// openBackend opens the store of -store. One process writes and reads:
// its own appends wake its consumers, so the poll for other processes'
// appends is turned down (on the bundled MongoDB test server every poll
// scans the collection). PostgreSQL and MongoDB runs work in a schema or
// database of their own, dropped when the bench ends.
func openBackend(ctx context.Context, o *Options) (Backend, error) {
	var cfg storeurl.Config
	cfg.SQLite.Store.PollInterval = time.Hour
	cfg.Postgres.Store.PollInterval = time.Hour
	cfg.MongoDB.Store.PollInterval = time.Hour
	switch o.Location.Kind {
	case storeurl.KindSQLite:
		return openSQLite(ctx, o.Location, cfg)
	case storeurl.KindPostgres:
		cfg.Postgres.Schema = "promlib_bench_" + randomHex()
		return openPostgres(ctx, o.Location, cfg)
	case storeurl.KindMongoDB:
		cfg.MongoDB.Database = "promlib_bench_" + randomHex()
		return openMongo(ctx, o.Location, cfg)
	}
	return openMemory(ctx, o)
}
