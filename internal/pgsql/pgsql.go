package pgsql

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/internal/sqlconn"
	"github.com/promethean/promlib/txn/pgtxn"
)

// Pool returns pool as a [sqlconn.Source].
func Pool(pool *pgxpool.Pool) sqlconn.Source { return source{pool} }

type source struct{ pool *pgxpool.Pool }

func (s source) Conn(ctx context.Context) (sqlconn.Conn, bool, error) {
	tx, err := pgtxn.From(ctx, s.pool)
	if err != nil {
		return nil, false, err
	}
	if tx != nil {
		return txConn{tx}, true, nil
	}
	return conn{s.pool}, false, nil
}

func (s source) Begin(ctx context.Context) (sqlconn.Tx, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return txConn{tx}, nil
}

func (s source) AfterCommit(ctx context.Context, f func()) bool {
	return pgtxn.AfterCommit(ctx, s.pool, f)
}

type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

type conn struct{ q querier }

func (c conn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (c conn) Query(ctx context.Context, q string, args ...any) (sqlconn.Rows, error) {
	return c.q.Query(ctx, q, args...)
}

type txConn struct{ tx pgx.Tx }

func (t txConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return conn{t.tx}.Exec(ctx, q, args...)
}

func (t txConn) Query(ctx context.Context, q string, args ...any) (sqlconn.Rows, error) {
	return t.tx.Query(ctx, q, args...)
}

func (t txConn) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t txConn) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
