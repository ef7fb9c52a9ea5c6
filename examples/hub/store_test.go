package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/examples/internal/cli"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/pgdb"
	"github.com/promethean/promlib/sqlitedb"
	"github.com/promethean/promlib/storeurl"
	"github.com/promethean/promlib/ws/wsclient"
)

// TestParseStore: -store names the database in storeurl's grammar
// (tested there); without it a set MONGO_URL selects MongoDB and
// otherwise the default is the SQLite file promlib.db; a bad value is a
// usage error of one line that names -store and the problem.
func TestParseStore(t *testing.T) {
	t.Parallel()
	mongoEnv := map[string]string{"MONGO_URL": "mongodb://127.0.0.1:27017"}
	sqlite := func(path, from string) storeSpec {
		return storeSpec{loc: storeurl.Location{Kind: storeurl.KindSQLite, Path: path}, from: from}
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    storeSpec
		wantErr []string // in the one-line usage error
	}{
		{name: "default", want: sqlite("promlib.db", "default")},
		{name: "MONGO_URL without -store", env: mongoEnv,
			want: storeSpec{loc: storeurl.Location{Kind: storeurl.KindMongoDB, URL: "mongodb://127.0.0.1:27017"}, from: "MONGO_URL"}},
		{name: "memory", args: []string{"-store", "memory"}, want: storeSpec{loc: storeurl.Location{Kind: storeurl.KindMemory}, from: "-store"}},
		{name: "-store wins over MONGO_URL", args: []string{"-store", "memory"}, env: mongoEnv,
			want: storeSpec{loc: storeurl.Location{Kind: storeurl.KindMemory}, from: "-store"}},
		{name: "sqlite", args: []string{"-store=sqlite:/var/lib/hub/events.db"}, want: sqlite("/var/lib/hub/events.db", "-store")},
		{name: "postgres", args: []string{"-store", "postgres://hub:pw@db.internal:5432/events"},
			want: storeSpec{loc: storeurl.Location{Kind: storeurl.KindPostgres, URL: "postgres://hub:pw@db.internal:5432/events"}, from: "-store"}},
		{name: "mongodb", args: []string{"-store", "mongodb://127.0.0.1:27017/?replicaSet=rs0"},
			want: storeSpec{loc: storeurl.Location{Kind: storeurl.KindMongoDB, URL: "mongodb://127.0.0.1:27017/?replicaSet=rs0"}, from: "-store"}},

		{name: "empty", args: []string{"-store", ""}, wantErr: []string{"-store: empty", "sqlite:PATH", "memory"}},
		{name: "unknown scheme", args: []string{"-store", "redis://u:secret@cache:6379"},
			wantErr: []string{"-store: ", `unknown scheme "redis"`, "postgres://", "mongodb://"}},
		{name: "no scheme", args: []string{"-store", "events.db"}, wantErr: []string{"-store: ", `"events.db" has no scheme`, "sqlite:events.db"}},
		{name: "empty sqlite path", args: []string{"-store", "sqlite:"}, wantErr: []string{"-store: ", "empty path", "sqlite:PATH"}},
		{name: "postgres bad port", args: []string{"-store", "postgres://hub:secret@db.internal:port/events"}, wantErr: []string{"-store: ", "bad PostgreSQL URL", "invalid port"}},
		{name: "mongodb without host", args: []string{"-store", "mongodb://"}, wantErr: []string{"-store: ", "MongoDB store is a URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := parseFlags(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if tt.wantErr != nil {
				var ue *cli.UsageError
				require.ErrorAs(t, err, &ue, "a bad -store is a usage error (exit status 2)")
				for _, w := range tt.wantErr {
					assert.ErrorContains(t, err, w)
				}
				assert.NotContains(t, err.Error(), "storeurl", "the flag's name, not the package's")
				assert.NotContains(t, err.Error(), "secret", "a URL's password is never repeated")
				assert.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, s.store)
		})
	}
}

// TestHubSQLiteStore: with -store sqlite:PATH the hub keeps its events in
// that file: a hub started again on it replays and delivers them, and the
// ops endpoints list them.
func TestHubSQLiteStore(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "events.db")
	testHubKeepsEvents(t, map[string]string{"WS_TOKEN": "tok"}, []string{"-store", "sqlite:" + file}, "events are kept in a SQLite file",
		func(t *testing.T, msg outbox.Message) {
			// Another process's writer on the same file, as a service
			// adding rows in its own transactions.
			ctx := context.Background()
			db, err := sqlitedb.Open(ctx, sqlitedb.Config{Path: file})
			require.NoError(t, err)
			defer db.Close(ctx)
			require.NoError(t, db.Txn().InTx(ctx, func(ctx context.Context) error { return db.Outbox().Add(ctx, msg) }))
		})
	assert.FileExists(t, file)
}

// TestHubPostgresStore: the same on PostgreSQL, in the schema PG_SCHEMA.
// Skipped without PG_URL, except under CI=true, where it fails.
func TestHubPostgresStore(t *testing.T) {
	t.Parallel()
	url, schema := testpg.URL(t), testpg.Schema(t)
	env := map[string]string{"WS_TOKEN": "tok", "PG_SCHEMA": schema}
	logs := testHubKeepsEvents(t, env, []string{"-store", url}, "events are kept in PostgreSQL",
		func(t *testing.T, msg outbox.Message) {
			ctx := context.Background()
			db, err := pgdb.Open(ctx, pgdb.Config{URL: url, Schema: schema})
			require.NoError(t, err)
			defer db.Close(ctx)
			require.NoError(t, db.Txn().InTx(ctx, func(ctx context.Context) error { return db.Outbox().Add(ctx, msg) }))
		})
	assert.NotContains(t, logs, url, "the URL may hold credentials")
	assert.Contains(t, logs, schema)
}

// testHubKeepsEvents publishes to a hub with env and args, stops it,
// starts another on the same store and checks that replay, a new group's
// subscription and /ops/topics see the event; then a row added to the
// store's outbox (by addToOutbox) is published by the hub's drainer. It
// returns the first hub's logs.
func testHubKeepsEvents(t *testing.T, env map[string]string, args []string, wantLog string, addToOutbox func(*testing.T, outbox.Message)) string {
	t.Helper()
	addr, logs, stop := runHub(t, env, args...)
	first := logs.String()
	assert.Contains(t, first, wantLog)
	assert.Contains(t, first, "outbox drainer running")
	status, out := httpPublish(t, addr, "hub.kept", "tok")
	require.Equal(t, http.StatusOK, status, "%v", out)
	stop()

	addr, _, stop = runHub(t, env, args...)
	defer stop()
	var replay struct {
		Events []event.Record `json:"events"`
	}
	getJSON(t, addr, "/replay?topic=hub.kept&from=earliest", &replay)
	require.Len(t, replay.Events, 1, "replayed by the second hub")
	assert.Equal(t, out["id"], replay.Events[0].ID)
	assert.JSONEq(t, `{"n":1}`, string(replay.Events[0].Payload))

	var topics struct {
		Topics []struct {
			Topic  string `json:"topic"`
			Events int64  `json:"events"`
		} `json:"topics"`
	}
	getJSON(t, addr, "/ops/topics?topic=hub.kept", &topics)
	require.Len(t, topics.Topics, 1)
	assert.Equal(t, int64(1), topics.Topics[0].Events, "/ops/topics counts the stored event")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	got := make(chan string, 1)
	_, err = c.Subscribe(ctx, "hub.kept", "after-restart", func(_ context.Context, m *wsclient.Message) error {
		select {
		case got <- m.ID:
		default:
		}
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	select {
	case id := <-got:
		assert.Equal(t, out["id"], id, "the event stored by the first hub")
	case <-ctx.Done():
		t.Fatal("the restarted hub did not deliver the stored event")
	}

	addToOutbox(t, outbox.Message{ID: "0192d6f0-0000-7000-8000-0000000000aa", Topic: "hub.outbox", Payload: []byte(`{"from":"outbox"}`)})
	require.Eventually(t, func() bool {
		var r struct {
			Events []event.Record `json:"events"`
		}
		getJSON(t, addr, "/replay?topic=hub.outbox&from=earliest", &r)
		return len(r.Events) == 1 && r.Events[0].ID == "0192d6f0-0000-7000-8000-0000000000aa"
	}, 20*time.Second, 20*time.Millisecond, "the hub's drainer publishes the outbox row")
	return first
}

// getJSON GETs path with the static token and decodes the 200 answer.
func getJSON(t *testing.T, addr, path string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	require.NoError(t, json.Unmarshal(body, v), "%s: %s", path, body)
}

// TestHubStoreOpenErrors: a store that cannot be opened stops the hub
// before it listens, with an error naming the store and the problem.
func TestHubStoreOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"sqlite file in a missing directory", []string{"-store", "sqlite:" + filepath.Join(dir, "missing", "events.db")}, []string{"SQLite store", "directory", "missing", "does not exist"}},
		{"sqlite path is a directory", []string{"-store", "sqlite:" + dir}, []string{"SQLite store", dir, "is a directory"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), append([]string{"-addr", "127.0.0.1:0"}, tt.args...), func(string) string { return "" },
				io.Discard, func(string) { t.Error("the hub listened") })
			require.Error(t, err)
			var ue *cli.UsageError
			assert.False(t, errors.As(err, &ue), "a store that fails to open is a failure (exit status 1), not a bad command line")
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// TestHubMongo: with MONGO_URL the hub keeps its events in MongoDB, so a
// hub started again on the same database delivers what the first one
// stored. Skipped without MONGO_URL, except under CI=true, where it fails.
func TestHubMongo(t *testing.T) {
	db := testmongo.DB(t) // dropped when the test ends, after the hubs stop
	env := map[string]string{"MONGO_URL": testmongo.URL(t), "MONGO_DB": db.Name(), "WS_TOKEN": "tok"}

	addr, logs, stop := runHub(t, env)
	assert.Contains(t, logs.String(), "events are kept in MongoDB")
	assert.NotContains(t, logs.String(), env["MONGO_URL"], "the URL may hold credentials")
	status, out := httpPublish(t, addr, "hub.mongo", "tok")
	require.Equal(t, http.StatusOK, status, "%v", out)
	stop()

	n, err := db.Collection("events").CountDocuments(context.Background(), map[string]any{"topic": "hub.mongo"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "stored in database %s", db.Name())

	addr, _ = startHub(t, env)
	ctx := context.Background()
	c, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	got := make(chan string, 1)
	_, err = c.Subscribe(ctx, "hub.mongo", "g", func(_ context.Context, m *wsclient.Message) error {
		got <- m.ID
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	select {
	case id := <-got:
		assert.Equal(t, out["id"], id, "the event stored by the first hub")
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted hub did not deliver the stored event")
	}
}
