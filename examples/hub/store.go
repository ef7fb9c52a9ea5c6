package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// storeCloseTimeout bounds closing the MongoDB store at shutdown.
const storeCloseTimeout = 10 * time.Second

// openStore returns the store of the hub's events, cursors and leases, and
// a function that closes it: MongoDB when MONGO_URL is set (database
// MONGO_DB, default "promlib"; its indexes are created if missing), else
// memory.
//
// db is the MongoDB database, nil for memory.
func openStore(ctx context.Context, getenv func(string) string, log *slog.Logger) (store event.Store, db *mongo.Database, closeStore func(), err error) {
	url := getenv("MONGO_URL")
	if url == "" {
		log.Info("events are kept in memory: they are lost when the hub stops (set MONGO_URL to keep them)")
		return event.NewMemoryStore(), nil, func() {}, nil
	}
	dbName := getenv("MONGO_DB")
	if dbName == "" {
		dbName = mongostore.DefaultDatabase
	}
	s, err := mongostore.Connect(ctx, url, mongostore.Config{Database: dbName, Logger: log})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("MongoDB store (MONGO_URL, MONGO_DB %q): %w", dbName, err)
	}
	closeStore = func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeCloseTimeout)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			log.Warn("closing the MongoDB store", "err", err)
		}
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		closeStore()
		return nil, nil, nil, fmt.Errorf("MongoDB store (MONGO_URL, MONGO_DB %q): creating indexes: %w", dbName, err)
	}
	// The URL is not logged: it may hold credentials.
	log.Info("events are kept in MongoDB", "database", dbName)
	return s, s.Database(), closeStore, nil
}
