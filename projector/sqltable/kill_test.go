package sqltable_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/projector/internal/changelogtest"
	"github.com/promethean/promlib/projector/sqltable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperEnv, set, makes the test binary a helper process that runs the
// table "killed" until it is killed (runHelper).
const helperEnv = "SQLTABLE_HELPER"

// killLease is the lease of the helper's partitions: the test's table
// takes them over that long after the kill.
const killLease = 2 * time.Second

// runHelper opens the store the environment names and runs the table
// "killed" over it, in batches of 4, until the process is killed.
func runHelper() int {
	ctx := context.Background()
	var (
		st      event.Store
		db      *sql.DB
		dialect sqltable.Dialect
	)
	if path := os.Getenv("SQLTABLE_SQLITE"); path != "" {
		s, err := sqlitestore.Open(ctx, path, sqliteConfig)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		st, db, dialect = s, s.DB(), sqltable.SQLite
	} else {
		s, err := pgstore.Open(ctx, os.Getenv("PG_URL"), pgstore.Config{Schema: os.Getenv("SQLTABLE_PG_SCHEMA"), MaxConns: 4})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		st, db, dialect = s, s.DB(), sqltable.Postgres
	}
	cfg := busConfig
	cfg.LeaseTTL = killLease
	bus, err := event.NewBus(st, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	tbl, err := sqltable.New(sqltable.Config{
		Bus: bus, Topic: changelogtest.Topic, DB: db, Dialect: dialect, Table: "killed", BatchSize: 4,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "helper: run:", tbl.Run(ctx))
	return 1
}

// TestProcessKilled runs the table in a helper process and kills it
// (SIGKILL) while events are published and it writes them, possibly in
// the middle of a transaction or between a commit and its acks; a table
// of this process takes the group's partitions over when the helper's
// leases end, and the table equals the latest value per key.
func TestProcessKilled(t *testing.T) {
	t.Parallel()
	for _, tc := range databases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.open(t)
			ctx := context.Background()
			bus := newBus(t, d.store, func(c *event.Config) { c.LeaseTTL = killLease })
			tbl, err := sqltable.New(sqltable.Config{Bus: bus, Topic: changelogtest.Topic, DB: d.db, Dialect: d.dialect, Table: "killed"})
			require.NoError(t, err)
			require.NoError(t, tbl.EnsureTable(ctx))

			rng := rand.New(rand.NewPCG(5, 19))
			want := map[string]string{}
			i := 0
			publish := func(n int) {
				t.Helper()
				for range n {
					key := fmt.Sprintf("k%d", rng.IntN(20))
					payload := fmt.Sprintf(`{"i":%d}`, i)
					if rng.IntN(4) == 0 {
						payload = "null"
					}
					i++
					_, err := bus.Publish(ctx, changelogtest.Topic, []byte(payload), event.WithKey(key))
					require.NoError(t, err)
					if payload == "null" {
						delete(want, key)
					} else {
						want[key] = payload
					}
				}
			}
			publish(100)

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"=1")
			for k, v := range d.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var out lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Publish while the helper writes; kill it once it has
			// committed some of its work.
			for {
				publish(5)
				lag, err := tbl.Lag(ctx)
				if err == nil && lag.Committed >= 40 {
					t.Logf("killed at committed %d of head %d", lag.Committed, lag.Head)
					break
				}
				select {
				case err := <-exited:
					t.Fatalf("helper exited: %v\n%s", err, out.String())
				default:
				}
				if i >= 5000 {
					t.Fatalf("the helper wrote nothing:\n%s", out.String())
				}
			}
			require.NoError(t, cmd.Process.Kill())
			<-exited
			publish(50)

			runUntilCaughtUp(t, tbl)
			assert.Equal(t, want, d.read(t, "killed"))
		})
	}
}

// lockedBuffer is the output of a helper process, written by the copying
// goroutines of exec and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
