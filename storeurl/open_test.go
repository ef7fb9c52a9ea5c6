package storeurl_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/mongodb"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/pgdb"
	"github.com/promethean/promlib/sqlitedb"
	"github.com/promethean/promlib/storeurl"
)

// TestMain disconnects the shared MongoDB client and checks that no
// goroutine of a closed database is left.
func TestMain(m *testing.M) { testmongo.Main(m) }

// TestOpenMemory: memory opens the memory store with an in-process
// outbox, dedupe store and transactions.
func TestOpenMemory(t *testing.T) {
	t.Parallel()
	db, err := storeurl.Open(context.Background(), "memory", storeurl.Config{})
	require.NoError(t, err)
	assert.Equal(t, storeurl.KindMemory, db.Kind())
	assert.Equal(t, "memory", db.Location().String())
	_, ok := storeurl.SQLite(db)
	assert.False(t, ok)
	checkDatabase(t, db, true)
}

// TestOpenSQLite: sqlite:PATH opens (creates) the file with every part in
// it, reachable as a sqlitedb.DB.
func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := storeurl.Open(context.Background(), "sqlite:"+path, storeurl.Config{})
	require.NoError(t, err)
	assert.Equal(t, storeurl.KindSQLite, db.Kind())
	assert.Equal(t, "SQLite", db.Kind().Name())
	sdb, ok := storeurl.SQLite(db)
	require.True(t, ok)
	assert.Equal(t, path, sdb.Path())
	_, ok = storeurl.Postgres(db)
	assert.False(t, ok)
	checkDatabase(t, db, true)
	assert.FileExists(t, path)
}

// TestOpenPostgres: postgres:// opens the database (Config.Postgres
// passes its schema through) with every part in that schema. Skipped
// without PG_URL, except under CI=true, where it fails.
func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	url, schema := testpg.URL(t), testpg.Schema(t)
	db, err := storeurl.Open(context.Background(), url, storeurl.Config{Postgres: pgdb.Config{Schema: schema}})
	require.NoError(t, err)
	assert.Equal(t, storeurl.KindPostgres, db.Kind())
	pdb, ok := storeurl.Postgres(db)
	require.True(t, ok)
	assert.Equal(t, schema, pdb.Schema())
	checkDatabase(t, db, true)
}

// TestOpenMongoDB: mongodb:// connects, with every part in
// Config.MongoDB.Database. The bundled test server has no transactions:
// the outbox is written outside one. Skipped without MONGO_URL, except
// under CI=true, where it fails.
func TestOpenMongoDB(t *testing.T) {
	t.Parallel()
	name := testmongo.DB(t).Name() // dropped when the test ends
	db, err := storeurl.Open(context.Background(), testmongo.URL(t), storeurl.Config{MongoDB: mongodb.Config{Database: name}})
	require.NoError(t, err)
	assert.Equal(t, storeurl.KindMongoDB, db.Kind())
	mdb, ok := storeurl.MongoDB(db)
	require.True(t, ok)
	assert.Equal(t, name, mdb.Database().Name())
	checkDatabase(t, db, false)
}

// TestOpenErrors: a string that is no store, a setting the string gives,
// and a SQLite file in a missing directory fail with errors naming them.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		in      string
		cfg     storeurl.Config
		wantErr error
	}{
		{"bad string", "events.db", storeurl.Config{}, storeurl.ErrNoScheme},
		{"sqlite path in Config", "sqlite:" + filepath.Join(dir, "a.db"), storeurl.Config{SQLite: sqlitedb.Config{Path: "b.db"}}, storeurl.ErrInvalid},
		{"sqlite missing directory", "sqlite:" + filepath.Join(dir, "missing", "a.db"), storeurl.Config{}, sqlitedb.ErrNoDirectory},
		{"sqlite directory", "sqlite:" + dir, storeurl.Config{}, sqlitedb.ErrIsDirectory},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := storeurl.Open(ctx, tt.in, tt.cfg)
			require.ErrorIs(t, err, tt.wantErr)
			assert.Nil(t, db)
		})
	}
	_, err := storeurl.Location{Kind: "redis"}.Open(ctx, storeurl.Config{})
	require.ErrorIs(t, err, storeurl.ErrInvalid)
	assert.ErrorContains(t, err, `"redis"`)
}

// checkDatabase publishes through the store, adds outbox rows (in a
// transaction that commits and one that rolls back, where withTx), claims
// and completes a dedupe key, and closes db.
func checkDatabase(t *testing.T, db storeurl.Database, withTx bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	bus, err := event.NewBus(db.Store(), event.Config{})
	require.NoError(t, err)
	rec, err := bus.Publish(ctx, "orders.created", []byte(`{"id":"o-1"}`))
	require.NoError(t, err)
	got, err := db.Store().Read(ctx, "orders.created", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, rec.ID, got[0].ID)

	msg := outbox.Message{Topic: "orders.created", Payload: []byte(`{"id":"o-2"}`)}
	if withTx {
		require.NoError(t, db.Txn().InTx(ctx, func(ctx context.Context) error { return db.Outbox().Add(ctx, msg) }))
		errAbort := errors.New("abort")
		err = db.Txn().InTx(ctx, func(ctx context.Context) error {
			if err := db.Outbox().Add(ctx, outbox.Message{Topic: "orders.created", Payload: []byte(`{"id":"o-3"}`)}); err != nil {
				return err
			}
			return errAbort
		})
		require.ErrorIs(t, err, errAbort)
	} else {
		require.NoError(t, db.Outbox().Add(ctx, msg))
	}
	stats, err := db.Outbox().Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Pending, "the committed row only")

	key := dedupe.Key("orders.created", "mail", rec.ID)
	state, err := db.Dedupe().Claim(ctx, key, "worker-1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Acquired, state)
	require.NoError(t, db.Dedupe().Complete(ctx, key, "worker-1", time.Hour))
	state, err = db.Dedupe().Claim(ctx, key, "worker-2", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Done, state)

	require.NoError(t, bus.Close(ctx))
	require.NoError(t, db.Close(ctx))
}
