package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// storeCloseTimeout bounds closing the MongoDB store at shutdown.
const storeCloseTimeout = 10 * time.Second

// openStore returns the store of the hub's events, cursors and leases, and
// a function that closes it: MongoDB when MONGO_URL is set (database
// MONGO_DB, default "promlib"; its indexes are created if missing), else
// memory.
func openStore(ctx context.Context, getenv func(string) string, log *slog.Logger) (event.Store, func(), error) {
	url := getenv("MONGO_URL")
	if url == "" {
		log.Info("events are kept in memory: they are lost when the hub stops (set MONGO_URL to keep them)")
		return event.NewMemoryStore(), func() {}, nil
	}
	db := getenv("MONGO_DB")
	if db == "" {
		db = mongostore.DefaultDatabase
	}
	s, err := mongostore.Connect(ctx, url, mongostore.Config{Database: db, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("MongoDB store (MONGO_URL, MONGO_DB %q): %w", db, err)
	}
	closeStore := func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeCloseTimeout)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			log.Warn("closing the MongoDB store", "err", err)
		}
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		closeStore()
		return nil, nil, fmt.Errorf("MongoDB store (MONGO_URL, MONGO_DB %q): creating indexes: %w", db, err)
	}
	// The URL is not logged: it may hold credentials.
	log.Info("events are kept in MongoDB", "database", db)
	return s, closeStore, nil
}
