package sqlconn

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strings"

	"github.com/promethean/promlib/txn/sqltxn"
)

// Conn runs statements.
type Conn interface {
	// Exec runs a statement and returns the rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query; the caller closes the rows.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Rows are a query's result.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Tx is a transaction a store began itself.
type Tx interface {
	Conn
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Source is a database whose stores write in the caller's transaction.
type Source interface {
	// Conn returns the caller's transaction on this database that ctx
	// carries (inTx true), or else the database; an error when ctx
	// carries transactions of other databases only.
	Conn(ctx context.Context) (c Conn, inTx bool, err error)
	// Begin begins a transaction of the store's own.
	Begin(ctx context.Context) (Tx, error)
	// AfterCommit runs f after the commit of the caller's transaction
	// that ctx carries, if a runner began it (see sqltxn.AfterCommit).
	AfterCommit(ctx context.Context, f func()) bool
}

// Atomic runs f so that its statements apply together or not at all: in
// the caller's transaction that ctx carries, inside a savepoint that a
// failure of f rolls back (so the caller's transaction stays usable and
// holds none of f's writes); otherwise in a transaction of its own.
func Atomic(ctx context.Context, src Source, f func(c Conn) error) error {
	c, inTx, err := src.Conn(ctx)
	if err != nil {
		return err
	}
	if inTx {
		if _, err := c.Exec(ctx, `SAVEPOINT promlib_atomic`); err != nil {
			return err
		}
		if err := f(c); err != nil {
			_, rerr := c.Exec(context.WithoutCancel(ctx), `ROLLBACK TO SAVEPOINT promlib_atomic`)
			if rerr == nil {
				_, rerr = c.Exec(context.WithoutCancel(ctx), `RELEASE SAVEPOINT promlib_atomic`)
			}
			return errors.Join(err, rerr)
		}
		_, err := c.Exec(ctx, `RELEASE SAVEPOINT promlib_atomic`)
		return err
	}
	tx, err := src.Begin(ctx)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return tx.Commit(ctx)
}

// QueryRow scans the first row of a query into dest and reports whether
// there was one.
func QueryRow(ctx context.Context, c Conn, query string, args []any, dest ...any) (bool, error) {
	rows, err := c.Query(ctx, query, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return false, rows.Err()
	}
	if err := rows.Scan(dest...); err != nil {
		return false, err
	}
	return true, nil
}

// Params writes the placeholders of n statement arguments, the first of
// them the from-th of the statement.
type Params func(from, n int) string

// Dollars is [Params] numbered "$from, $from+1, ...", as PostgreSQL
// wants.
func Dollars(from, n int) string {
	b := make([]byte, 0, n*5)
	for i := range n {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '$')
		b = appendInt(b, from+i)
	}
	return string(b)
}

// Questions is [Params] as "?, ?, ...": SQLite binds them by position,
// where the modernc driver looks each "$N" up among all the arguments
// (measured: a 500-row INSERT of 3,000 "$N" took 40 times as long as
// with "?").
func Questions(_, n int) string {
	if n == 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

// TableName is what a configured table name must match: an identifier
// that needs no quoting in either database.
var TableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,50}$`)

// SQL returns db as a [Source]: ctx's transaction is the one a
// [sqltxn.Runner] of db began (or [sqltxn.WithTx] put there).
func SQL(db *sql.DB) Source { return sqlSource{db} }

type sqlSource struct{ db *sql.DB }

func (s sqlSource) Conn(ctx context.Context) (Conn, bool, error) {
	tx, err := sqltxn.From(ctx, s.db)
	if err != nil {
		return nil, false, err
	}
	if tx != nil {
		return sqlTx{tx}, true, nil
	}
	return sqlDB(s), false, nil
}

func (s sqlSource) Begin(ctx context.Context) (Tx, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return sqlTx{tx}, nil
}

func (s sqlSource) AfterCommit(ctx context.Context, f func()) bool {
	return sqltxn.AfterCommit(ctx, s.db, f)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func exec(ctx context.Context, e execer, query string, args []any) (int64, error) {
	res, err := e.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func query(ctx context.Context, e execer, q string, args []any) (Rows, error) {
	rows, err := e.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

type sqlDB struct{ db *sql.DB }

func (d sqlDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return exec(ctx, d.db, q, args)
}

func (d sqlDB) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return query(ctx, d.db, q, args)
}

type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return exec(ctx, t.tx, q, args)
}

func (t sqlTx) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return query(ctx, t.tx, q, args)
}

func (t sqlTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t sqlTx) Rollback(context.Context) error { return t.tx.Rollback() }

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }
