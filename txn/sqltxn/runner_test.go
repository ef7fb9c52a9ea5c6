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
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/sqliteoutbox"
	"github.com/promethean/promlib/txn/internal/sqltxtest"
	"github.com/promethean/promlib/txn/sqltxn"
)

func TestMain(m *testing.M) {
	sqltxtest.HelperMain(openEnv)
	os.Exit(m.Run())
}

// openDB opens the SQLite file at path as sqlitestore does (WAL, one
// writing connection whose transactions take the write lock at BEGIN).
func openDB(path string) (*sql.DB, error) {
	db, err := sqlitestore.OpenDB(path, sqlitestore.Config{Synchronous: "NORMAL"})
	if err != nil {
		return nil, err
	}
	w, r := db.Write, db.Read
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

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n))
	return n
}

func createT(t *testing.T, db *sql.DB) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), `CREATE TABLE t (id TEXT PRIMARY KEY)`)
	require.NoError(t, err)
}

// A transaction of another database in ctx is refused by a store (it
// cannot write in it), and an InTx of the other database inside it
// begins its own; each database's statements go to its own transaction.
func TestTwoDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := testDB(t), testDB(t)
	createT(t, a)
	createT(t, b)
	ra, err := sqltxn.NewRunner(a, sqltxn.Config{})
	require.NoError(t, err)
	rb, err := sqltxn.NewRunner(b, sqltxn.Config{})
	require.NoError(t, err)
	obB, err := sqliteoutbox.New(b, sqliteoutbox.Config{})
	require.NoError(t, err)
	require.NoError(t, obB.CreateTables(ctx))

	errAbort := errors.New("abort")
	err = ra.InTx(ctx, func(ctx context.Context) error {
		err := obB.Add(ctx, msg())
		assert.ErrorIs(t, err, sqltxn.ErrOtherDB, "b's store in a's transaction")
		txA, err := sqltxn.From(ctx, a)
		require.NoError(t, err)
		require.NotNil(t, txA)
		if _, err := txA.ExecContext(ctx, `INSERT INTO t (id) VALUES ('a')`); err != nil {
			return err
		}
		require.NoError(t, rb.InTx(ctx, func(ctx context.Context) error {
			if err := obB.Add(ctx, msg()); err != nil {
				return err
			}
			txB, err := sqltxn.From(ctx, b)
			require.NoError(t, err)
			txA2, err := sqltxn.From(ctx, a)
			require.NoError(t, err)
			assert.Same(t, txA, txA2, "a's transaction is still reachable")
			_, err = txB.ExecContext(ctx, `INSERT INTO t (id) VALUES ('b')`)
			return err
		}))
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	assert.Zero(t, count(t, a, "t"), "a's transaction rolled back")
	assert.Equal(t, 1, count(t, b, "t"), "b's committed on its own")
	assert.Equal(t, 1, count(t, b, "promlib_outbox"))
	tx, err := sqltxn.From(ctx, a)
	assert.NoError(t, err)
	assert.Nil(t, tx, "no transaction outside InTx")
	assert.False(t, sqltxn.InTransaction(ctx))
}

// A ctx that ends before the commit rolls the transaction back, although
// fn returned nil.
func TestCancelledBeforeCommitRollsBack(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	createT(t, db)
	r, err := sqltxn.NewRunner(db, sqltxn.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	err = r.InTx(ctx, func(ctx context.Context) error {
		if err := exec(ctx, `INSERT INTO t (id) VALUES ('x')`); err != nil {
			return err
		}
		cancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, count(t, db, "t"))
}

// A transaction the application began itself carries through WithTx:
// stores and runners of its database write in it, and the application
// commits it.
func TestWithTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testDB(t)
	createT(t, db)
	r, err := sqltxn.NewRunner(db, sqltxn.Config{})
	require.NoError(t, err)
	ob, err := sqliteoutbox.New(db, sqliteoutbox.Config{})
	require.NoError(t, err)
	require.NoError(t, ob.CreateTables(ctx))
	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		tctx := sqltxn.WithTx(ctx, db, tx)
		require.NoError(t, ob.Add(tctx, msg()))
		require.NoError(t, r.InTx(tctx, func(ctx context.Context) error {
			got, _ := sqltxn.Tx(ctx)
			assert.Same(t, tx, got, "the runner joins it")
			return exec(ctx, `INSERT INTO t (id) VALUES ('x')`)
		}))
		if commit {
			require.NoError(t, tx.Commit())
		} else {
			require.NoError(t, tx.Rollback())
		}
	}
	assert.Equal(t, 1, count(t, db, "t"))
	assert.Equal(t, 1, count(t, db, "promlib_outbox"))
}

// Config.Retry runs fn again, in a new transaction, after an error it
// calls transient, up to MaxAttempts runs.
func TestRetry(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	createT(t, db)
	errBusy := errors.New("busy")
	r, err := sqltxn.NewRunner(db, sqltxn.Config{Retry: func(err error) bool { return errors.Is(err, errBusy) }, MaxAttempts: 3})
	require.NoError(t, err)
	runs := 0
	err = r.InTx(context.Background(), func(ctx context.Context) error {
		runs++
		if err := exec(ctx, `INSERT INTO t (id) VALUES ('x')`); err != nil {
			return err
		}
		if runs < 3 {
			return errBusy
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, runs)
	assert.Equal(t, 1, count(t, db, "t"), "the failed runs rolled back")

	runs = 0
	err = r.InTx(context.Background(), func(ctx context.Context) error { runs++; return errBusy })
	require.ErrorIs(t, err, errBusy)
	assert.Equal(t, 3, runs, "at most MaxAttempts runs")
}

func msg() outbox.Message {
	return outbox.Message{Topic: "t", Payload: []byte(`1`)}
}

// AfterCommit's functions run once the transaction commits, never after a
// rollback; an InTx that joins registers on the outer transaction; there
// is nothing to register on outside a Runner's transaction.
func TestAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testDB(t)
	r, err := sqltxn.NewRunner(db, sqltxn.Config{})
	require.NoError(t, err)
	var ran []string
	note := func(s string) func() { return func() { ran = append(ran, s) } }
	require.NoError(t, r.InTx(ctx, func(ctx context.Context) error {
		assert.True(t, sqltxn.AfterCommit(ctx, db, note("outer")))
		require.NoError(t, r.InTx(ctx, func(ctx context.Context) error {
			assert.True(t, sqltxn.AfterCommit(ctx, db, note("joined")))
			return nil
		}))
		assert.Empty(t, ran, "not before the commit")
		return nil
	}))
	assert.Equal(t, []string{"outer", "joined"}, ran)

	ran = nil
	_ = r.InTx(ctx, func(ctx context.Context) error {
		sqltxn.AfterCommit(ctx, db, note("rolled back"))
		return errors.New("abort")
	})
	assert.Empty(t, ran, "never after a rollback")

	assert.False(t, sqltxn.AfterCommit(ctx, db, note("none")), "no transaction")
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	assert.False(t, sqltxn.AfterCommit(sqltxn.WithTx(ctx, db, tx), db, note("mine")), "the application's own transaction")
	require.NoError(t, tx.Rollback())
	assert.Empty(t, ran)
}
