package pgdb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/pgdb"
	"github.com/promethean/promlib/projector/sqltable"
	"github.com/promethean/promlib/txn/pgtxn"
)

// TestMain checks that a closed DB leaves no goroutine (the store's
// listener, the pool's health checks) behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOpen: one Open on a URL gives the store, the outbox, the dedupe
// store and the runner in one schema: an event published through the
// store, an order and its outbox row in one transaction (none of one that
// rolls back), a dedupe mark; Close closes the pool it opened. Skipped
// without PG_URL, except under CI=true, where it fails.
func TestOpen(t *testing.T) {
	t.Parallel()
	url, schema := testpg.URL(t), testpg.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pgdb.Open(ctx, pgdb.Config{URL: url, Schema: schema})
	require.NoError(t, err)
	assert.Equal(t, schema, db.Schema())
	checkParts(ctx, t, db)
	pool := db.Pool()
	require.NoError(t, db.Close(ctx))
	require.NoError(t, db.Close(ctx), "Close again returns the first result")
	assert.Error(t, pool.Ping(ctx), "Close closes the pool Open opened")
}

// TestOpenWithPool: with the application's pool, every part is in the
// pool's schema and the application's own statements join the runner's
// transactions; Close leaves the pool open.
func TestOpenWithPool(t *testing.T) {
	t.Parallel()
	pool, schema := testpg.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pgdb.Open(ctx, pgdb.Config{Pool: pool})
	require.NoError(t, err)
	assert.Equal(t, schema, db.Schema(), "the pool's current schema")
	assert.Same(t, pool, db.Pool())
	checkParts(ctx, t, db)
	var events int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM promlib_events WHERE topic = 'orders.created'`).Scan(&events), "the store's tables are in the pool's schema")
	assert.Equal(t, 1, events)
	require.NoError(t, db.Close(ctx))
	require.NoError(t, pool.Ping(ctx), "Close leaves the application's pool open")
}

// TestOpenPoolSchemaMismatch: a Schema other than the pool's is refused,
// so that the outbox never lands apart from the events.
func TestOpenPoolSchemaMismatch(t *testing.T) {
	t.Parallel()
	pool, schema := testpg.Pool(t)
	other := testpg.Schema(t)
	_, err := pgdb.Open(context.Background(), pgdb.Config{Pool: pool, Schema: other})
	require.ErrorIs(t, err, pgdb.ErrInvalid)
	assert.ErrorContains(t, err, schema)
	assert.ErrorContains(t, err, other)
	require.NoError(t, pool.Ping(context.Background()), "a failed Open leaves the application's pool open")
}

// TestOpenPoolSettingsInURL: the pool's settings in the URL
// (pool_max_conns) set the pool Open opens and are not sent to the
// server by the store's connections.
func TestOpenPoolSettingsInURL(t *testing.T) {
	t.Parallel()
	url, schema := testpg.URL(t), testpg.Schema(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	ctx := context.Background()
	db, err := pgdb.Open(ctx, pgdb.Config{URL: url + sep + "pool_max_conns=3", Schema: schema})
	require.NoError(t, err)
	defer db.Close(ctx)
	assert.Equal(t, int32(3), db.Pool().Config().MaxConns)
	bus, err := event.NewBus(db.Store(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	_, err = bus.Publish(ctx, "t", []byte(`{}`))
	require.NoError(t, err, "the store's connections work")
}

// TestConfigValidate: every bad setting is named.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		cfg     pgdb.Config
		wantErr error
		want    string
	}{
		{"no URL nor pool", pgdb.Config{}, pgdb.ErrInvalid, "URL: empty"},
		{"store schema", pgdb.Config{URL: "postgres://h/db", Store: pgstore.Config{Schema: "s"}}, pgdb.ErrInvalid, "Store.Schema"},
		{"txn", pgdb.Config{URL: "postgres://h/db", Txn: pgtxn.Config{MaxAttempts: -1}}, pgtxn.ErrInvalid, "Txn"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.want)
			_, err = pgdb.Open(context.Background(), tt.cfg)
			require.ErrorIs(t, err, tt.wantErr, "Open validates first")
		})
	}
	for _, url := range []string{"postgres://hub:secret@db.internal:port/events", "postgres://hub:secret@db.internal/events?connect_timeout=soon"} {
		_, err := pgdb.Open(context.Background(), pgdb.Config{URL: url})
		require.ErrorIs(t, err, pgdb.ErrInvalid)
		assert.ErrorContains(t, err, "URL: ")
		assert.NotContains(t, err.Error(), "secret", "the password is never repeated")
	}
}

// checkParts publishes through the store, writes an order and its
// outbox row in one transaction (and rolls one back), marks a key done
// in a transaction, and runs a changelog table.
func checkParts(ctx context.Context, t *testing.T, db *pgdb.DB) {
	t.Helper()
	bus, err := event.NewBus(db.Store(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	rec, err := bus.Publish(ctx, "orders.created", []byte(`{"id":"o-1"}`))
	require.NoError(t, err)

	_, err = db.Pool().Exec(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`)
	require.NoError(t, err)
	order := func(id string, fail error) error {
		return db.Txn().InTx(ctx, func(ctx context.Context) error {
			tx, ok := pgtxn.Tx(ctx)
			require.True(t, ok, "InTx passes its transaction")
			if _, err := tx.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
				return err
			}
			if err := db.Outbox().Add(ctx, outbox.Message{Topic: "orders.created", Payload: []byte(`{"id":"` + id + `"}`)}); err != nil {
				return err
			}
			return fail
		})
	}
	require.NoError(t, order("o-2", nil))
	errRefused := errors.New("payment refused")
	require.ErrorIs(t, order("o-3", errRefused), errRefused)
	ids, err := pgx.CollectRows(must(db.Pool().Query(ctx, `SELECT id FROM orders`)), pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"o-2"}, ids)
	stats, err := db.Outbox().Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Pending, "the row of the committed order only")

	key := dedupe.Key("orders.created", "mail", rec.ID)
	require.NoError(t, db.Txn().InTx(ctx, func(ctx context.Context) error {
		return db.Dedupe().MarkDone(ctx, key, "mailer", time.Hour)
	}))
	state, err := db.Dedupe().Claim(ctx, key, "other", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Done, state)

	tbl, err := db.Table(sqltable.Config{Bus: bus, Topic: "accounts", Table: "accounts"})
	require.NoError(t, err)
	require.NoError(t, tbl.EnsureTable(ctx))
	_, err = bus.Publish(ctx, "accounts", []byte(`{"balance":10}`), event.WithKey("alice"))
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tbl.Run(runCtx) }()
	require.Eventually(t, func() bool {
		var balance int
		err := db.Pool().QueryRow(ctx, `SELECT (value->>'balance')::int FROM accounts WHERE key = 'alice'`).Scan(&balance)
		return err == nil && balance == 10
	}, 20*time.Second, 10*time.Millisecond, "the table is in the schema")
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		require.NoError(t, err)
	}
	_, err = db.Table(sqltable.Config{Bus: bus, Topic: "accounts", Table: "t2", Dialect: sqltable.SQLite})
	require.ErrorIs(t, err, pgdb.ErrInvalid)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
