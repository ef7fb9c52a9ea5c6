package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/promethean/promlib/event"
)

// openStore returns the store of the hub's events, cursors and leases, and
// a function that closes it. This is the seam for MongoDB: with MONGO_URL
// set, connect event/mongostore here (EnsureIndexes, then the store) and
// close its client in the returned function. Until that is wired, the hub
// refuses MONGO_URL rather than silently keeping events in memory.
func openStore(ctx context.Context, getenv func(string) string, log *slog.Logger) (event.Store, func(), error) {
	if url := getenv("MONGO_URL"); url != "" {
		return nil, nil, errors.New("MONGO_URL is set, but this hub keeps events in memory only so far; unset it")
	}
	log.Info("events are kept in memory: they are lost when the hub stops")
	return event.NewMemoryStore(), func() {}, nil
}
