package main

import (
	"context"
	"fmt"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/event/sqlitestore"
)

// openStore opens the run's store: the SQLite file db, or the PostgreSQL
// database at the URL db in schema. It returns the store with a function
// that closes it.
func openStore(ctx context.Context, kind, db, schema string) (event.Store, func(), error) {
	closeCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}
	switch kind {
	case "sqlite":
		s, err := sqlitestore.Open(ctx, db, sqlitestore.Config{PollInterval: 50 * time.Millisecond})
		if err != nil {
			return nil, nil, err
		}
		return s, func() {
			cctx, cancel := closeCtx()
			defer cancel()
			_ = s.Close(cctx)
		}, nil
	case "postgres":
		s, err := pgstore.Open(ctx, db, pgstore.Config{Schema: schema, MaxConns: 4, PollInterval: 250 * time.Millisecond})
		if err != nil {
			return nil, nil, err
		}
		return s, func() {
			cctx, cancel := closeCtx()
			defer cancel()
			_ = s.Close(cctx)
		}, nil
	default:
		return nil, nil, fmt.Errorf("unknown store %q", kind)
	}
}
