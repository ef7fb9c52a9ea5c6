package main

import (
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/examples/internal/cli"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/storeurl"
)

// TestParseStoreFlag: -store takes the hub's grammar, memory by default;
// every mistake is a usage error of one line naming the flag, found
// before anything is opened or created.
func TestParseStoreFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	existing := filepath.Join(dir, "exists.db")
	require.NoError(t, os.WriteFile(existing, nil, 0o600))
	for _, tt := range []struct {
		name string
		args []string
		want storeurl.Location
		// wantErr is in the usage error.
		wantErr []string
	}{
		{name: "default", want: storeurl.Location{Kind: storeurl.KindMemory}},
		{name: "sqlite", args: []string{"-store", "sqlite:" + filepath.Join(dir, "b.db")},
			want: storeurl.Location{Kind: storeurl.KindSQLite, Path: filepath.Join(dir, "b.db")}},
		{name: "postgres", args: []string{"-store", "postgres://bench@db.internal/events"},
			want: storeurl.Location{Kind: storeurl.KindPostgres, URL: "postgres://bench@db.internal/events"}},
		{name: "mongodb", args: []string{"-store", "mongodb://127.0.0.1:27017"},
			want: storeurl.Location{Kind: storeurl.KindMongoDB, URL: "mongodb://127.0.0.1:27017"}},

		{name: "a name of the old bench", args: []string{"-store", "mongo"}, wantErr: []string{"-store: ", `"mongo" names a database`, "mongodb://"}},
		{name: "unknown scheme", args: []string{"-store", "redis://cache"}, wantErr: []string{"-store: ", `unknown scheme "redis"`, "sqlite:PATH"}},
		{name: "sqlite in a missing directory", args: []string{"-store", "sqlite:" + filepath.Join(dir, "missing", "b.db")},
			wantErr: []string{"-store: ", "the directory", "missing", "does not exist"}},
		{name: "sqlite file exists", args: []string{"-store", "sqlite:" + existing}, wantErr: []string{"-store: ", "the file exists"}},
		{name: "the old -sqlite-dir", args: []string{"-sqlite-dir", "/nonexistent"}, wantErr: []string{"-sqlite-dir", "not defined"}},
		{name: "the old -pg-url", args: []string{"-pg-url", "postgres://db/x"}, wantErr: []string{"-pg-url", "not defined"}},
		{name: "fanout over sqlite", args: []string{"-mode", "fanout", "-rate", "10", "-store", "sqlite:" + filepath.Join(dir, "b.db")},
			wantErr: []string{"-store: sqlite:", "memory only"}},
		{name: "fanout over postgres hides the password", args: []string{"-mode", "fanout", "-rate", "10", "-store", "postgres://bench:secret@db/x"},
			wantErr: []string{"-store: postgres://bench:xxxxx@db/x", "memory only"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseFlags(tt.args, func(string) string { return "" }, io.Discard)
			if tt.wantErr != nil {
				var ue *cli.UsageError
				require.ErrorAs(t, err, &ue, "exit status 2")
				for _, w := range tt.wantErr {
					assert.ErrorContains(t, err, w)
				}
				assert.NotContains(t, err.Error(), "\n")
				assert.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, o.Location)
		})
	}
	_, err := os.Stat(filepath.Join(dir, "b.db"))
	assert.ErrorIs(t, err, os.ErrNotExist, "parsing creates nothing")
}

// TestOpenBackendSQLite: a new file at the path, removed by Close.
func TestOpenBackendSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bench.db")
	be := openChecked(t, "sqlite:"+path)
	assert.FileExists(t, path)
	be.Close()
	assert.NoFileExists(t, path)
	assert.NoFileExists(t, path+"-wal")
}

// TestOpenBackendPostgres: a schema of the bench's own, dropped by
// Close. Skipped without PG_URL, except under CI=true, where it fails.
func TestOpenBackendPostgres(t *testing.T) {
	t.Parallel()
	url := testpg.URL(t)
	be := openChecked(t, url)
	var schema string
	be.Close()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'promlib_bench_%'`).Scan(&schema)
	assert.ErrorIs(t, err, pgx.ErrNoRows, "the bench's schema is dropped (%s)", schema)
}

// TestOpenBackendMongo: a database of the bench's own, dropped by Close.
// Skipped without MONGO_URL, except under CI=true, where it fails.
func TestOpenBackendMongo(t *testing.T) {
	t.Parallel()
	url := testmongo.URL(t)
	o := &Options{Store: url}
	require.NoError(t, o.parseStore())
	be, err := openBackend(context.Background(), o)
	require.NoError(t, err)
	publishOne(t, be)
	names, err := testmongo.Client(t).ListDatabaseNames(context.Background(), map[string]any{})
	require.NoError(t, err)
	var ours []string
	for _, n := range names {
		if strings.HasPrefix(n, "promlib_bench_") {
			ours = append(ours, n)
		}
	}
	require.Len(t, ours, 1, "a database of the bench's own")
	be.Close()
	names, err = testmongo.Client(t).ListDatabaseNames(context.Background(), map[string]any{})
	require.NoError(t, err)
	assert.NotContains(t, names, ours[0], "dropped at the end")
}

// TestMain disconnects the shared MongoDB client.
func TestMain(m *testing.M) {
	code := m.Run()
	testmongo.Close()
	os.Exit(code)
}

// openChecked opens the backend of -store s and publishes one event.
func openChecked(t *testing.T, s string) Backend {
	t.Helper()
	o := &Options{Store: s}
	require.NoError(t, o.parseStore())
	be, err := openBackend(context.Background(), o)
	require.NoError(t, err)
	publishOne(t, be)
	return be
}

func publishOne(t *testing.T, be Backend) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bus, err := event.NewBus(be.Store, event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	_, err = bus.Publish(ctx, benchTopic, []byte(`{}`))
	require.NoError(t, err)
}

// TestRawCommitEach: the commit-each baseline of -sync stores each of the
// n rows once, from -publishers goroutines, on every durable store. Not
// parallel with the other tests: TestOpenBackendMongo counts the bench's
// databases.
func TestRawCommitEach(t *testing.T) {
	for _, tt := range []struct {
		name  string
		store func(t testing.TB) string
		count func(t *testing.T, be Backend) int64
	}{
		{name: "sqlite", store: func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "b.db") },
			count: countSQL},
		{name: "postgres", store: testpg.URL, count: countSQL},
		{name: "mongodb", store: testmongo.URL, count: func(t *testing.T, be Backend) int64 {
			db, ok := storeurl.MongoDB(be.DB)
			require.True(t, ok)
			n, err := db.Database().Collection("raw_each").CountDocuments(context.Background(), map[string]any{})
			require.NoError(t, err)
			return n
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := &Options{Store: tt.store(t), N: 101, Payload: 64, Publishers: 8}
			require.NoError(t, o.parseStore())
			be, err := openBackend(context.Background(), o)
			require.NoError(t, err)
			defer be.Close()
			require.NotNil(t, be.RawEach)
			each, err := be.RawEach(context.Background(), o)
			require.NoError(t, err)
			assert.Positive(t, each.PerS)
			assert.Positive(t, each.P99Ms)
			assert.Equal(t, int64(o.N), tt.count(t, be), "each row once")
		})
	}
}

// countSQL counts the rows of the commit-each baseline's table, each seq
// once.
func countSQL(t *testing.T, be Backend) int64 {
	t.Helper()
	var db interface{ SQL() *sql.DB }
	if s, ok := storeurl.SQLite(be.DB); ok {
		db = s
	} else {
		p, ok := storeurl.Postgres(be.DB)
		require.True(t, ok)
		db = p
	}
	var n, seqs int64
	require.NoError(t, db.SQL().QueryRow(`SELECT count(*), count(DISTINCT seq) FROM raw_each`).Scan(&n, &seqs))
	assert.Equal(t, n, seqs)
	return n
}

// TestRawArrays: PostgreSQL's array baseline stores each of the n rows
// once, over more than one batch, with the payload of each event. Not
// parallel with the other tests: TestOpenBackendPostgres finds no schema
// of the bench's left.
func TestRawArrays(t *testing.T) {
	o := &Options{Store: testpg.URL(t), N: 2500, Payload: 64}
	require.NoError(t, o.parseStore())
	be, err := openBackend(context.Background(), o)
	require.NoError(t, err)
	defer be.Close()
	require.NotNil(t, be.RawArrays)
	perS, err := be.RawArrays(context.Background(), o)
	require.NoError(t, err)
	assert.Positive(t, perS)
	db, ok := storeurl.Postgres(be.DB)
	require.True(t, ok)
	var n, seqs int64
	var payload []byte
	require.NoError(t, db.SQL().QueryRow(`SELECT count(*), count(DISTINCT seq) FROM raw_arrays`).Scan(&n, &seqs))
	assert.EqualValues(t, o.N, n)
	assert.Equal(t, n, seqs)
	require.NoError(t, db.SQL().QueryRow(`SELECT payload FROM raw_arrays WHERE seq = 1234`).Scan(&payload))
	assert.Equal(t, makePayload(1233, o.Payload), payload)
}
