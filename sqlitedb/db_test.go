package sqlitedb_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/projector/sqltable"
	"github.com/promethean/promlib/sqlitedb"
	"github.com/promethean/promlib/txn/sqltxn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOpen: one Open gives the store, the outbox, the dedupe store and
// the runner on one file: an event published through the store, an
// order and its outbox row in one transaction (and none of a transaction
// that rolls back), a dedupe mark; all still there when the file is
// opened again.
func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sqlitedb.Open(ctx, sqlitedb.Config{Path: path})
	require.NoError(t, err)
	assert.Equal(t, path, db.Path())

	bus, err := event.NewBus(db.Store(), event.Config{})
	require.NoError(t, err)
	rec, err := bus.Publish(ctx, "orders.created", []byte(`{"id":"o-1"}`))
	require.NoError(t, err)
	require.NoError(t, bus.Close(ctx))

	_, err = db.SQL().ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`)
	require.NoError(t, err)
	order := func(id string, fail error) error {
		return db.Txn().InTx(ctx, func(ctx context.Context) error {
			tx, ok := sqltxn.Tx(ctx)
			require.True(t, ok, "InTx passes its transaction")
			if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (?)`, id); err != nil {
				return err
			}
			if err := db.Outbox().Add(ctx, outbox.Message{ID: "0192d6f0-0000-7000-8000-00000000000" + id[2:], Topic: "orders.created", Payload: []byte(`{"id":"` + id + `"}`)}); err != nil {
				return err
			}
			return fail
		})
	}
	require.NoError(t, order("o-2", nil))
	errRefused := errors.New("payment refused")
	require.ErrorIs(t, order("o-3", errRefused), errRefused)

	key := dedupe.Key("orders.created", "mail", rec.ID)
	require.NoError(t, db.Txn().InTx(ctx, func(ctx context.Context) error {
		return db.Dedupe().MarkDone(ctx, key, "mailer", time.Hour)
	}))
	require.NoError(t, db.Close(ctx))
	require.NoError(t, db.Close(ctx), "Close again returns the first result")

	db, err = sqlitedb.Open(ctx, sqlitedb.Config{Path: path})
	require.NoError(t, err)
	defer db.Close(ctx)
	got, err := db.Store().Read(ctx, "orders.created", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, rec.ID, got[0].ID)
	var orders []string
	rows, err := db.SQL().QueryContext(ctx, `SELECT id FROM orders ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		orders = append(orders, id)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	assert.Equal(t, []string{"o-2"}, orders)
	stats, err := db.Outbox().Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Pending, "the row of the committed order only")
	row, err := db.Outbox().Row(ctx, "0192d6f0-0000-7000-8000-000000000002")
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"o-2"}`, string(row.Payload))
	seen, err := db.Dedupe().Seen(ctx, key)
	require.NoError(t, err)
	assert.True(t, seen)
}

// TestTable: a changelog table in the file, written through the store's
// connection.
func TestTable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlitedb.Open(ctx, sqlitedb.Config{Path: filepath.Join(t.TempDir(), "app.db")})
	require.NoError(t, err)
	defer db.Close(ctx)
	bus, err := event.NewBus(db.Store(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)

	tbl, err := db.Table(sqltable.Config{Bus: bus, Topic: "accounts", Table: "accounts"})
	require.NoError(t, err)
	require.NoError(t, tbl.EnsureTable(ctx))
	_, err = bus.Publish(ctx, "accounts", []byte(`{"balance":10}`), event.WithKey("alice"))
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tbl.Run(runCtx) }()
	require.Eventually(t, func() bool {
		var v string
		err := db.SQL().QueryRowContext(ctx, `SELECT value FROM accounts WHERE key = 'alice'`).Scan(&v)
		return err == nil && v == `{"balance":10}`
	}, 20*time.Second, 10*time.Millisecond)
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		require.NoError(t, err)
	}

	other, err := sqlitedb.Open(ctx, sqlitedb.Config{Path: filepath.Join(t.TempDir(), "other.db")})
	require.NoError(t, err)
	defer other.Close(ctx)
	_, err = db.Table(sqltable.Config{Bus: bus, Topic: "accounts", Table: "t2", DB: other.SQL()})
	require.ErrorIs(t, err, sqlitedb.ErrInvalid)
	assert.ErrorContains(t, err, "Config.DB")
	_, err = db.Table(sqltable.Config{Bus: bus, Topic: "accounts", Table: "t2", Dialect: sqltable.Postgres})
	require.ErrorIs(t, err, sqlitedb.ErrInvalid)
	assert.ErrorContains(t, err, "Dialect")
}

// TestOpenErrors: bad settings and paths fail before anything is
// created, with errors naming them.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, tt := range []struct {
		name    string
		cfg     sqlitedb.Config
		wantErr error
		want    string
	}{
		{"empty path", sqlitedb.Config{}, sqlitedb.ErrInvalid, "Path: empty"},
		{"in memory", sqlitedb.Config{Path: ":memory:"}, sqlitedb.ErrInvalid, "event.NewMemoryStore"},
		{"options", sqlitedb.Config{Path: "a.db?mode=ro"}, sqlitedb.ErrInvalid, "'?' or '#'"},
		{"uri", sqlitedb.Config{Path: "file:a.db"}, sqlitedb.ErrInvalid, "file name"},
		{"txn", sqlitedb.Config{Path: filepath.Join(dir, "a.db"), Txn: sqltxn.Config{MaxAttempts: -1}}, sqltxn.ErrInvalid, "Txn: "},
		{"missing directory", sqlitedb.Config{Path: filepath.Join(dir, "missing", "a.db")}, sqlitedb.ErrNoDirectory, "missing"},
		{"directory", sqlitedb.Config{Path: dir}, sqlitedb.ErrIsDirectory, dir},
		{"a file as the directory", sqlitedb.Config{Path: filepath.Join(file, "a.db")}, sqlitedb.ErrNoDirectory, file},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, err := sqlitedb.Open(context.Background(), tt.cfg)
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.want)
			assert.Nil(t, db)
		})
	}
	_, err := os.Stat(filepath.Join(dir, "a.db"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a bad Config creates no file")
}
