package sqltable_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/projector/internal/changelogtest"
	"github.com/promethean/promlib/projector/sqltable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	goleak.VerifyTestMain(m)
}

// database is a bus over a SQL store and the table's database, the
// store's own.
type database struct {
	bus     *event.Bus
	store   event.Store
	db      *sql.DB
	dialect sqltable.Dialect
	// env tells a helper process how to open the store (openHelperStore).
	env map[string]string
}

// databases are the two SQL databases; each test runs on both.
var databases = []struct {
	name string
	open func(t *testing.T) database
}{
	{"sqlite", openSQLite},
	{"postgres", openPostgres},
}

func openSQLite(t *testing.T) database {
	t.Helper()
	env := map[string]string{"SQLTABLE_SQLITE": filepath.Join(t.TempDir(), "t.db")}
	s, err := sqlitestore.Open(context.Background(), env["SQLTABLE_SQLITE"], sqliteConfig)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return database{bus: newBus(t, s), store: s, db: s.DB(), dialect: sqltable.SQLite, env: env}
}

var sqliteConfig = sqlitestore.Config{PollInterval: 20 * time.Millisecond, Synchronous: "NORMAL"}

func openPostgres(t *testing.T) database {
	t.Helper()
	env := map[string]string{"PG_URL": testpg.URL(t), "SQLTABLE_PG_SCHEMA": testpg.Schema(t)}
	s, err := pgstore.Open(context.Background(), env["PG_URL"], pgstore.Config{Schema: env["SQLTABLE_PG_SCHEMA"], MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return database{bus: newBus(t, s), store: s, db: s.DB(), dialect: sqltable.Postgres, env: env}
}

// busConfig is the configuration of the tests' buses: fast polls and
// commits.
var busConfig = event.Config{Partitions: 4, PollInterval: 20 * time.Millisecond, CommitInterval: 10 * time.Millisecond}

func newBus(t *testing.T, s event.Store, mod ...func(*event.Config)) *event.Bus {
	t.Helper()
	cfg := busConfig
	for _, m := range mod {
		m(&cfg)
	}
	bus, err := event.NewBus(s, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	return bus
}

func (d database) table(t *testing.T, name string, batch int, opts ...event.SubscribeOption) *sqltable.Table {
	t.Helper()
	tbl, err := sqltable.New(sqltable.Config{
		Bus: d.bus, Topic: changelogtest.Topic, DB: d.db, Dialect: d.dialect, Table: name,
		BatchSize: batch, Subscribe: opts,
	})
	require.NoError(t, err)
	require.NoError(t, tbl.EnsureTable(context.Background()))
	return tbl
}

// read returns the live rows of the view name as key -> compact JSON.
func (d database) read(t *testing.T, name string) map[string]string {
	t.Helper()
	rows, err := d.db.Query(`SELECT key, value FROM "` + name + `"`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k string
		var v []byte
		require.NoError(t, rows.Scan(&k, &v))
		var b bytes.Buffer
		require.NoError(t, json.Compact(&b, v), "key %s", k)
		out[k] = b.String()
	}
	require.NoError(t, rows.Err())
	return out
}

// TestTableEqualsModelThroughCrashes runs the changelog tables' test
// (changelogtest.Run) on both databases: random puts and tombstones while
// the writer crashes before a batch's transaction, in it after half the
// rows (rolled back) or after its commit before the acks (the batch comes
// again and changes nothing); the table equals the latest value per key
// after every round and after a rebuild.
func TestTableEqualsModelThroughCrashes(t *testing.T) {
	t.Parallel()
	for _, tc := range databases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.open(t)
			changelogtest.Run(t, d.bus, changelogtest.Harness{
				New: func(t *testing.T, _ *event.Bus, batch int, fail func(int) error, opts ...event.SubscribeOption) changelogtest.Table {
					tbl := d.table(t, "accounts", batch, opts...)
					if fail != nil {
						tbl.SetFail(fail)
					}
					return tbl
				},
				Read: func(t *testing.T) map[string]string { return d.read(t, "accounts") },
				AddStray: func(t *testing.T) {
					_, err := d.db.Exec(`INSERT INTO accounts_changelog (key, seq, ts, deleted, value, content_type)
						VALUES ('stray', $1, 0, FALSE, '{}', 'application/json')`, int64(1)<<40)
					require.NoError(t, err)
				},
			})
		})
	}
}

// rowOf is the stored row of key in the table of rows of name, markers
// of deleted keys included.
type rowOf struct {
	Seq     int64
	Deleted bool
	Value   []byte
	Data    []byte
	CT      string
}

func (d database) row(t *testing.T, name, key string) (rowOf, bool) {
	t.Helper()
	var r rowOf
	err := d.db.QueryRow(`SELECT seq, deleted, value, data, content_type FROM "`+name+`_changelog" WHERE key = $1`, key).
		Scan(&r.Seq, &r.Deleted, &r.Value, &r.Data, &r.CT)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false
	}
	require.NoError(t, err)
	return r, true
}

func rec(key string, seq uint64, payload string) event.Record {
	return event.Record{Topic: changelogtest.Topic, Key: key, Seq: seq, ID: fmt.Sprint(seq), Payload: []byte(payload)}
}

// TestSeqGuard writes batches out of order: a put or a tombstone older
// than the key's row changes nothing, a deleted key keeps its marker and
// seq, so an older put cannot bring it back, and a newer put does.
func TestSeqGuard(t *testing.T) {
	t.Parallel()
	for _, tc := range databases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.open(t)
			ctx := context.Background()
			tbl := d.table(t, "guard", 0)
			require.NoError(t, tbl.Write(ctx, []event.Record{rec("a", 5, `{"v":5}`), rec("b", 2, `{"v":2}`), rec("a", 4, `{"v":4}`)}))
			assert.Equal(t, map[string]string{"a": `{"v":5}`, "b": `{"v":2}`}, d.read(t, "guard"), "the newest of a batch")
			require.NoError(t, tbl.Write(ctx, []event.Record{rec("a", 7, `null`), rec("b", 1, `null`)}))
			assert.Equal(t, map[string]string{"b": `{"v":2}`}, d.read(t, "guard"), "tombstone of a, an older one of b")
			r, ok := d.row(t, "guard", "a")
			require.True(t, ok, "a deleted key keeps its marker")
			assert.Equal(t, rowOf{Seq: 7, Deleted: true, CT: event.ContentTypeJSON}, r)
			require.NoError(t, tbl.Write(ctx, []event.Record{rec("a", 6, `{"v":6}`), rec("a", 5, `{"v":5}`)}))
			assert.Equal(t, map[string]string{"b": `{"v":2}`}, d.read(t, "guard"), "older puts do not bring a back")
			require.NoError(t, tbl.Write(ctx, []event.Record{rec("a", 8, `{"v":8}`), rec("b", 2, `null`)}))
			assert.Equal(t, map[string]string{"a": `{"v":8}`, "b": `{"v":2}`}, d.read(t, "guard"), "a newer put brings a back; a tombstone of b's seq is not newer")
		})
	}
}

// TestContentTypes stores JSON as JSON (jsonb on PostgreSQL), binary
// payloads as bytes with their content type, and on PostgreSQL a JSON
// payload that jsonb cannot hold (\u0000) as bytes.
func TestContentTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range databases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.open(t)
			ctx := context.Background()
			tbl := d.table(t, "content", 0)
			bin := []byte{0, 1, 2, 0xff}
			nul := `{"s":"a\u0000b"}`
			for _, p := range []struct {
				key, ct string
				payload []byte
			}{
				{"j", "", []byte(`{"a":[1,2]}`)},
				{"t", "application/vnd.x+json", []byte(`"s"`)},
				{"b", "image/png", bin},
				{"n", "", []byte(nul)},
			} {
				_, err := d.bus.Publish(ctx, changelogtest.Topic, p.payload, event.WithKey(p.key), event.WithContentType(p.ct))
				require.NoError(t, err)
			}
			runUntilCaughtUp(t, tbl)

			r, _ := d.row(t, "content", "j")
			assert.JSONEq(t, `{"a":[1,2]}`, string(r.Value))
			assert.Nil(t, r.Data)
			assert.Equal(t, event.ContentTypeJSON, r.CT)
			r, _ = d.row(t, "content", "t")
			assert.JSONEq(t, `"s"`, string(r.Value))
			assert.Equal(t, "application/vnd.x+json", r.CT)
			r, _ = d.row(t, "content", "b")
			assert.Nil(t, r.Value)
			assert.Equal(t, bin, r.Data)
			assert.Equal(t, "image/png", r.CT)
			r, _ = d.row(t, "content", "n")
			if d.dialect == sqltable.Postgres {
				assert.Nil(t, r.Value, "jsonb cannot hold \\u0000")
				assert.Equal(t, nul, string(r.Data))
			} else {
				assert.Equal(t, nul, string(r.Value))
				assert.Nil(t, r.Data)
			}
			if d.dialect == sqltable.Postgres {
				var typ string
				require.NoError(t, d.db.QueryRow(`SELECT jsonb_typeof(value) FROM content WHERE key = 'j'`).Scan(&typ))
				assert.Equal(t, "object", typ, "value is jsonb")
			}
		})
	}
}

// runUntilCaughtUp runs tbl until its lag is 0, then stops it.
func runUntilCaughtUp(t *testing.T, tbl *sqltable.Table) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tbl.Run(ctx) }()
	require.Eventually(t, func() bool {
		lag, err := tbl.Lag(context.Background())
		return err == nil && lag.Lag == 0
	}, 30*time.Second, 5*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// TestRebuildWhileRunning rebuilds twice while events are published and a
// Table runs: every swap keeps what the running Table wrote, and the
// table ends equal to the latest value per key, with no rebuild table
// left.
func TestRebuildWhileRunning(t *testing.T) {
	t.Parallel()
	for _, tc := range databases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.open(t)
			ctx := context.Background()
			tbl := d.table(t, "live", 16)
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- tbl.Run(rctx) }()
			want := map[string]string{}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 150 {
					key := fmt.Sprintf("k%d", i%20)
					payload := fmt.Sprintf(`{"i":%d}`, i)
					if i%7 == 3 {
						payload = "null"
					}
					_, err := d.bus.Publish(ctx, changelogtest.Topic, []byte(payload), event.WithKey(key))
					if !assert.NoError(t, err) {
						return
					}
					if payload == "null" {
						delete(want, key)
					} else {
						want[key] = payload
					}
				}
			}()
			for range 2 {
				require.NoError(t, tbl.Rebuild(ctx))
			}
			wg.Wait()
			require.Eventually(t, func() bool {
				lag, err := tbl.Lag(ctx)
				return err == nil && lag.Lag == 0
			}, 30*time.Second, 5*time.Millisecond)
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			assert.Equal(t, want, d.read(t, "live"))
			require.NoError(t, tbl.Rebuild(ctx))
			assert.Equal(t, want, d.read(t, "live"), "rebuilt when idle")
			_, err := d.db.Exec(`SELECT 1 FROM live_changelog_rebuild`)
			assert.Error(t, err, "the rebuild table is renamed away")
		})
	}
}

// TestBadNames refuses table names that are not plain identifiers, before
// touching the database, and a name taken by a table of the user's fails
// EnsureTable and leaves that table as it was.
func TestBadNames(t *testing.T) {
	t.Parallel()
	d := openSQLite(t)
	for _, name := range []string{
		``, `accounts"; DROP TABLE promlib_events; --`, `Accounts`, `1st`, `a.b`, `a-b`, `a b`, `été`,
		strings.Repeat("a", sqltable.MaxTableLen+1),
	} {
		_, err := sqltable.New(sqltable.Config{Bus: d.bus, Topic: "t", DB: d.db, Dialect: sqltable.SQLite, Table: name})
		require.ErrorIs(t, err, sqltable.ErrInvalid, "%q", name)
		assert.Contains(t, err.Error(), "Table", "%q", name)
	}
	var n int

	_, err := sqltable.New(sqltable.Config{Topic: "bad topic", BatchSize: -1, FlushInterval: -1, Dialect: 7})
	require.ErrorIs(t, err, sqltable.ErrInvalid)
	for _, field := range []string{"Bus", "DB", "Dialect", "Table", "BatchSize", "FlushInterval", "topic"} {
		assert.Contains(t, err.Error(), field)
	}

	for _, mine := range []string{"mine", "mine_changelog"} {
		_, err = d.db.Exec(`CREATE TABLE ` + mine + ` (id INTEGER); INSERT INTO ` + mine + ` VALUES (1)`)
		require.NoError(t, err)
		name := strings.TrimSuffix(mine, "_changelog")
		tbl, err := sqltable.New(sqltable.Config{Bus: d.bus, Topic: "t", DB: d.db, Dialect: sqltable.SQLite, Table: name})
		require.NoError(t, err)
		err = tbl.EnsureTable(context.Background())
		require.Error(t, err, mine)
		assert.Contains(t, err.Error(), "sqltable: create "+name)
		assert.Contains(t, err.Error(), mine+" is not")
		require.NoError(t, d.db.QueryRow(`SELECT count(*) FROM `+mine).Scan(&n))
		assert.Equal(t, 1, n, "the user's table is untouched")
		_, err = d.db.Exec(`DROP TABLE ` + mine)
		require.NoError(t, err)
		_, err = d.db.Exec(`DROP VIEW IF EXISTS ` + name)
		require.NoError(t, err)
		_, err = d.db.Exec(`DROP TABLE IF EXISTS ` + name + `_changelog`)
		require.NoError(t, err)
	}
}

// TestKeywordName keeps a table whose name is a SQL keyword: names are
// quoted.
func TestKeywordName(t *testing.T) {
	t.Parallel()
	for _, tc := range databases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.open(t)
			tbl := d.table(t, "order", 0)
			_, err := d.bus.Publish(context.Background(), changelogtest.Topic, []byte(`{"x":1}`), event.WithKey("k"))
			require.NoError(t, err)
			runUntilCaughtUp(t, tbl)
			assert.Equal(t, map[string]string{"k": `{"x":1}`}, d.read(t, "order"))
		})
	}
}

func TestHasNULEscape(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		`"a"`: false, `"\u0000"`: true, `"\\u0000"`: false, `"\\\u0000"`: true, `"\\\\u0000"`: false,
		`"\u00001"`: true, `"\\u0000\u0000"`: true, `"\u0001"`: false,
	} {
		assert.Equal(t, want, sqltable.HasNULEscape([]byte(in)), in)
	}
}

// TestConcurrentWriters has two writers of one table write the same keys
// at once, in batches of shuffled, overlapping records (as a member that
// stalled past its lease and the one that took its partition would): each
// key ends with its newest record, deleted or not, and no write fails.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	for _, tc := range databases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.open(t)
			ctx := context.Background()
			tbls := []*sqltable.Table{d.table(t, "race", 0), d.table(t, "race", 0)}
			rng := rand.New(rand.NewPCG(7, 19))
			var recs []event.Record
			want := map[string]string{}
			for seq := uint64(1); seq <= 200; seq++ {
				key := fmt.Sprintf("k%d", rng.IntN(10))
				payload := fmt.Sprintf(`{"seq":%d}`, seq)
				if rng.IntN(3) == 0 {
					payload = "null"
				}
				recs = append(recs, rec(key, seq, payload))
				if payload == "null" {
					delete(want, key)
				} else {
					want[key] = payload
				}
			}
			var wg sync.WaitGroup
			for i, tbl := range tbls {
				mine := slices.Clone(recs)
				r := rand.New(rand.NewPCG(uint64(i), 3))
				r.Shuffle(len(mine), func(a, b int) { mine[a], mine[b] = mine[b], mine[a] })
				wg.Go(func() {
					for len(mine) > 0 {
						n := min(len(mine), 1+r.IntN(12))
						assert.NoError(t, tbl.Write(ctx, mine[:n]))
						mine = mine[n:]
					}
				})
			}
			wg.Wait()
			assert.Equal(t, want, d.read(t, "race"))
		})
	}
}
