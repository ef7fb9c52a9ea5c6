package sqltable_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/projector/sqltable"
)

// A table "accounts" in the SQLite file of the event store, holding the
// latest balance of every account: a tombstone (a null payload) deletes
// bob, whose marker keeps the seq of his deletion in accounts_changelog.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqltable")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "app.db"), sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)
	bus, err := event.NewBus(store, event.Config{Partitions: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close(ctx)

	tbl, err := sqltable.New(sqltable.Config{
		Bus: bus, Topic: "accounts", DB: store.DB(), Dialect: sqltable.SQLite, Table: "accounts",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := tbl.EnsureTable(ctx); err != nil {
		log.Fatal(err)
	}
	for _, p := range []struct{ key, payload string }{
		{"alice", `{"balance":10}`}, {"bob", `{"balance":5}`}, {"alice", `{"balance":12}`}, {"bob", `null`},
	} {
		if _, err := bus.Publish(ctx, "accounts", []byte(p.payload), event.WithKey(p.key)); err != nil {
			log.Fatal(err)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tbl.Run(runCtx) }()
	if err := waitCaughtUp(ctx, tbl); err != nil {
		log.Fatal(err)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}

	rows, err := store.DB().QueryContext(ctx, `SELECT key, seq, value FROM accounts ORDER BY key`)
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, value string
		var seq int64
		if err := rows.Scan(&key, &seq, &value); err != nil {
			log.Fatal(err)
		}
		fmt.Println(key, seq, value)
	}
	var deleted bool
	var seq int64
	if err := store.DB().QueryRowContext(ctx, `SELECT deleted, seq FROM accounts_changelog WHERE key = 'bob'`).Scan(&deleted, &seq); err != nil {
		log.Fatal(err)
	}
	fmt.Println("bob deleted:", deleted, "at seq", seq)
	// Output:
	// alice 3 {"balance":12}
	// bob deleted: true at seq 4
}

// waitCaughtUp waits until the table's group has settled every event.
func waitCaughtUp(ctx context.Context, tbl *sqltable.Table) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		lag, err := tbl.Lag(ctx)
		if err != nil && !errors.Is(err, event.ErrNotFound) { // no cursor before Run's first commit
			return err
		}
		if err == nil && lag.Lag == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("lag still %d", lag.Lag)
		}
	}
}
