package sqltxn_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/dedupe/sqlitededupe"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/internal/sqltxtest"
	"github.com/promethean/promlib/outbox/sqliteoutbox"
	"github.com/promethean/promlib/txn/sqltxn"
)

func TestMain(m *testing.M) {
	sqltxtest.HelperMain(openEnv)
	os.Exit(m.Run())
}

// openDB opens the SQLite file at path as sqlitestore does (WAL, one
// writing connection whose transactions take the write lock at BEGIN).
func openDB(path string) (*sql.DB, error) {
	w, r, err := sqlitestore.OpenDB(path, sqlitestore.Config{Synchronous: "NORMAL"})
	if err != nil {
		return nil, err
	}
	return w, r.Close()
}

func testDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := openDB(filepath.Join(t.TempDir(), "app.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

func exec(ctx context.Context, q string, args ...any) error {
	tx, ok := sqltxn.Tx(ctx)
	if !ok {
		return errors.New("no transaction in ctx")
	}
	_, err := tx.ExecContext(ctx, q, args...)
	return err
}

// openEnv opens the application's file and the event store's file in
// the directory SQLTXTEST_DIR.
func openEnv(ctx context.Context, getenv func(string) string) (sqltxtest.Env, func(), error) {
	dir := getenv("SQLTXTEST_DIR")
	db, err := openDB(filepath.Join(dir, "app.db"))
	if err != nil {
		return sqltxtest.Env{}, nil, err
	}
	env, err := newEnv(ctx, db)
	if err != nil {
		_ = db.Close()
		return sqltxtest.Env{}, nil, err
	}
	events, err := sqlitestore.Open(ctx, filepath.Join(dir, "events.db"), sqlitestore.Config{Synchronous: "NORMAL"})
	if err != nil {
		_ = db.Close()
		return sqltxtest.Env{}, nil, err
	}
	env.Events = events
	return env, func() { _ = events.Close(context.Background()); _ = db.Close() }, nil
}

func newEnv(ctx context.Context, db *sql.DB) (sqltxtest.Env, error) {
	tx, err := sqltxn.NewRunner(db, sqltxn.Config{})
	if err != nil {
		return sqltxtest.Env{}, err
	}
	ob, err := sqliteoutbox.New(db, sqliteoutbox.Config{})
	if err != nil {
		return sqltxtest.Env{}, err
	}
	dd, err := sqlitededupe.New(db, sqlitededupe.Config{})
	if err != nil {
		return sqltxtest.Env{}, err
	}
	if err := errors.Join(ob.CreateTables(ctx), dd.CreateTables(ctx)); err != nil {
		return sqltxtest.Env{}, err
	}
	return sqltxtest.Env{
		Runner: tx, Outbox: ob, Dedupe: dd, Exec: exec,
		Int: func(ctx context.Context, q string, args ...any) (int64, error) {
			var n int64
			err := db.QueryRowContext(ctx, q, args...).Scan(&n)
			return n, err
		},
	}, nil
}

func TestTransactions(t *testing.T) {
	t.Parallel()
	sqltxtest.Run(t, func(t *testing.T) sqltxtest.Env {
		env, err := newEnv(context.Background(), testDB(t))
		require.NoError(t, err)
		return env
	})
}

func TestProcesses(t *testing.T) {
	t.Parallel()
	sqltxtest.RunProcesses(t, sqltxtest.Shared{
		New:  func(t *testing.T) map[string]string { return map[string]string{"SQLTXTEST_DIR": t.TempDir()} },
		Open: openEnv,
	})
}

func TestNewRunnerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := sqltxn.NewRunner(nil, sqltxn.Config{})
	assert.ErrorIs(t, err, sqltxn.ErrInvalid)
	assert.ErrorContains(t, err, "db")
	_, err = sqltxn.NewRunner(testDB(t), sqltxn.Config{MaxAttempts: -1})
	assert.ErrorIs(t, err, sqltxn.ErrInvalid)
	assert.ErrorContains(t, err, "MaxAttempts")
}
