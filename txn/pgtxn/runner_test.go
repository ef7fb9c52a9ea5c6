package pgtxn_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/dedupe/pgdedupe"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/pgoutbox"
	"github.com/promethean/promlib/txn/internal/sqltxtest"
	"github.com/promethean/promlib/txn/pgtxn"
)

func TestMain(m *testing.M) {
	sqltxtest.HelperMain(openEnv)
	os.Exit(m.Run())
}

func exec(ctx context.Context, q string, args ...any) error {
	tx, ok := pgtxn.Tx(ctx)
	if !ok {
		return errors.New("no transaction in ctx")
	}
	_, err := tx.Exec(ctx, q, args...)
	return err
}

// openEnv opens a pool and an event store in the schema PGTXN_SCHEMA.
func openEnv(ctx context.Context, getenv func(string) string) (sqltxtest.Env, func(), error) {
	url, schema := getenv("PG_URL"), getenv("PGTXN_SCHEMA")
	events, err := pgstore.Open(ctx, url, pgstore.Config{Schema: schema, MaxConns: 4})
	if err != nil {
		return sqltxtest.Env{}, nil, err
	}
	pool, err := testpg.OpenPool(ctx, url, schema)
	if err != nil {
		_ = events.Close(ctx)
		return sqltxtest.Env{}, nil, err
	}
	env, err := newEnv(ctx, pool)
	if err != nil {
		pool.Close()
		_ = events.Close(ctx)
		return sqltxtest.Env{}, nil, err
	}
	env.Events = events
	return env, func() { pool.Close(); _ = events.Close(context.Background()) }, nil
}

func newEnv(ctx context.Context, pool *pgxpool.Pool) (sqltxtest.Env, error) {
	tx, err := pgtxn.NewRunner(pool, pgtxn.Config{})
	if err != nil {
		return sqltxtest.Env{}, err
	}
	ob, err := pgoutbox.New(pool, pgoutbox.Config{})
	if err != nil {
		return sqltxtest.Env{}, err
	}
	dd, err := pgdedupe.New(pool, pgdedupe.Config{})
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
			err := pool.QueryRow(ctx, q, args...).Scan(&n)
			return n, err
		},
	}, nil
}

func TestTransactions(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	sqltxtest.Run(t, func(t *testing.T) sqltxtest.Env {
		pool, _ := testpg.Pool(t)
		env, err := newEnv(context.Background(), pool)
		require.NoError(t, err)
		return env
	})
}

func TestProcesses(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	sqltxtest.RunProcesses(t, sqltxtest.Shared{
		New: func(t *testing.T) map[string]string {
			_, schema := testpg.Pool(t)
			return map[string]string{"PG_URL": testpg.URL(t), "PGTXN_SCHEMA": schema}
		},
		Open: openEnv,
	})
}

func TestNewRunnerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := pgtxn.NewRunner(nil, pgtxn.Config{})
	assert.ErrorIs(t, err, pgtxn.ErrInvalid)
	assert.ErrorContains(t, err, "pool")
}

func count(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n))
	return n
}

func testPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := testpg.Pool(t)
	_, err := pool.Exec(context.Background(), `CREATE TABLE t (id TEXT PRIMARY KEY)`)
	require.NoError(t, err)
	return pool
}

func msg() outbox.Message { return outbox.Message{Topic: "t", Payload: []byte(`1`)} }

// A transaction of another pool in ctx is refused by a store (it cannot
// write in it), and an InTx of the other pool inside it begins its own;
// each pool's statements go to its own transaction.
func TestTwoPools(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	ctx := context.Background()
	a, b := testPool(t), testPool(t)
	ra, err := pgtxn.NewRunner(a, pgtxn.Config{})
	require.NoError(t, err)
	rb, err := pgtxn.NewRunner(b, pgtxn.Config{})
	require.NoError(t, err)
	obB, err := pgoutbox.New(b, pgoutbox.Config{})
	require.NoError(t, err)
	require.NoError(t, obB.CreateTables(ctx))

	errAbort := errors.New("abort")
	err = ra.InTx(ctx, func(ctx context.Context) error {
		assert.ErrorIs(t, obB.Add(ctx, msg()), pgtxn.ErrOtherPool, "b's store in a's transaction")
		if err := exec(ctx, `INSERT INTO t (id) VALUES ('a')`); err != nil {
			return err
		}
		txA, err := pgtxn.From(ctx, a)
		require.NoError(t, err)
		require.NoError(t, rb.InTx(ctx, func(ctx context.Context) error {
			txA2, err := pgtxn.From(ctx, a)
			require.NoError(t, err)
			assert.Same(t, txA, txA2, "a's transaction is still reachable")
			if err := obB.Add(ctx, msg()); err != nil {
				return err
			}
			return exec(ctx, `INSERT INTO t (id) VALUES ('b')`)
		}))
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	assert.Zero(t, count(t, a, "t"), "a's transaction rolled back")
	assert.Equal(t, 1, count(t, b, "t"), "b's committed on its own")
	assert.Equal(t, 1, count(t, b, "promlib_outbox"))
	assert.False(t, pgtxn.InTransaction(ctx))
}

// A serialization failure raised by the server runs fn again in a new
// transaction, up to MaxAttempts runs; other errors do not.
func TestRetriesSerializationFailures(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	ctx := context.Background()
	pool := testPool(t)
	r, err := pgtxn.NewRunner(pool, pgtxn.Config{MaxAttempts: 3})
	require.NoError(t, err)
	raise := func(ctx context.Context, code string) error {
		return exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '`+code+`'; END $$`)
	}
	runs := 0
	require.NoError(t, r.InTx(ctx, func(ctx context.Context) error {
		runs++
		if err := exec(ctx, `INSERT INTO t (id) VALUES ('x')`); err != nil {
			return err
		}
		if runs == 1 {
			return raise(ctx, "40001")
		}
		if runs == 2 {
			return raise(ctx, "40P01")
		}
		return nil
	}))
	assert.Equal(t, 3, runs)
	assert.Equal(t, 1, count(t, pool, "t"), "the failed runs rolled back")

	runs = 0
	err = r.InTx(ctx, func(ctx context.Context) error { runs++; return raise(ctx, "40001") })
	assert.True(t, pgtxn.Transient(err), "%v", err)
	assert.Equal(t, 3, runs, "at most MaxAttempts runs")

	runs = 0
	err = r.InTx(ctx, func(ctx context.Context) error { runs++; return raise(ctx, "23505") })
	assert.ErrorContains(t, err, "conflict")
	assert.Equal(t, 1, runs, "a unique violation is not retried")
}

// A ctx that ends before the commit rolls the transaction back, although
// fn returned nil; a transaction begun by the application joins through
// WithTx.
func TestCancelAndWithTx(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	pool := testPool(t)
	r, err := pgtxn.NewRunner(pool, pgtxn.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	err = r.InTx(ctx, func(ctx context.Context) error {
		if err := exec(ctx, `INSERT INTO t (id) VALUES ('cancelled')`); err != nil {
			return err
		}
		cancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, count(t, pool, "t"))

	bg := context.Background()
	tx, err := pool.Begin(bg)
	require.NoError(t, err)
	tctx := pgtxn.WithTx(bg, pool, tx)
	require.NoError(t, r.InTx(tctx, func(ctx context.Context) error {
		got, _ := pgtxn.Tx(ctx)
		assert.Same(t, tx, got, "the runner joins it")
		return exec(ctx, `INSERT INTO t (id) VALUES ('mine')`)
	}))
	assert.Zero(t, count(t, pool, "t"), "not committed yet")
	require.NoError(t, tx.Commit(bg))
	assert.Equal(t, 1, count(t, pool, "t"))
}

// AfterCommit's functions run once the transaction commits, never after a
// rollback; an InTx that joins registers on the outer transaction; there
// is nothing to register on outside a Runner's transaction.
func TestAfterCommit(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	ctx := context.Background()
	pool := testPool(t)
	r, err := pgtxn.NewRunner(pool, pgtxn.Config{})
	require.NoError(t, err)
	var ran []string
	note := func(s string) func() { return func() { ran = append(ran, s) } }
	require.NoError(t, r.InTx(ctx, func(ctx context.Context) error {
		assert.True(t, pgtxn.AfterCommit(ctx, pool, note("outer")))
		require.NoError(t, r.InTx(ctx, func(ctx context.Context) error {
			assert.True(t, pgtxn.AfterCommit(ctx, pool, note("joined")))
			return nil
		}))
		assert.Empty(t, ran, "not before the commit")
		return nil
	}))
	assert.Equal(t, []string{"outer", "joined"}, ran)

	ran = nil
	_ = r.InTx(ctx, func(ctx context.Context) error {
		pgtxn.AfterCommit(ctx, pool, note("rolled back"))
		return errors.New("abort")
	})
	assert.Empty(t, ran, "never after a rollback")

	assert.False(t, pgtxn.AfterCommit(ctx, pool, note("none")), "no transaction")
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	assert.False(t, pgtxn.AfterCommit(pgtxn.WithTx(ctx, pool, tx), pool, note("mine")), "the application's own transaction")
	require.NoError(t, tx.Rollback(ctx))
	assert.Empty(t, ran)
}
