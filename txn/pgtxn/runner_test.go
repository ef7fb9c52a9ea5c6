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
	"github.com/promethean/promlib/internal/sqltxtest"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/outbox/pgoutbox"
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
