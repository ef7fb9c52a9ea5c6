package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compileCounter is a connector whose connections keep size statements
// and count what the driver compiles (its PrepareContext: the driver
// compiles a statement when it is prepared).
type compileCounter struct {
	dsn      string
	size     int
	compiled atomic.Int64
}

func (c *compileCounter) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := connector{dsn: c.dsn}.Driver().Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: countingConn{dc, &c.compiled}, stmts: newStmtCache(c.size)}, nil
}

func (c *compileCounter) Driver() driver.Driver { return connector{}.Driver() }

type countingConn struct {
	driver.Conn
	n *atomic.Int64
}

func (c countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.n.Add(1)
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c countingConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, o)
}

func (c countingConn) ExecContext(ctx context.Context, q string, a []driver.NamedValue) (driver.Result, error) {
	c.n.Add(1) // the driver compiles a text it runs directly, too
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, a)
}

func (c countingConn) QueryContext(ctx context.Context, q string, a []driver.NamedValue) (driver.Rows, error) {
	c.n.Add(1)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, a)
}

// openCounted opens a database of one connection that keeps size
// statements, with a table t(v INTEGER PRIMARY KEY, s TEXT).
func openCounted(t *testing.T, size int) (*sql.DB, *compileCounter) {
	t.Helper()
	cc := &compileCounter{dsn: "file:" + filepath.Join(t.TempDir(), "c.db"), size: size}
	db := sql.OpenDB(cc)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	_, err := db.Exec(`CREATE TABLE t (v INTEGER PRIMARY KEY, s TEXT)`)
	require.NoError(t, err)
	cc.compiled.Store(0)
	return db, cc
}

func TestKeptStatementsCompileOnce(t *testing.T) {
	db, cc := openCounted(t, stmtCacheSize)
	for i := range 100 {
		_, err := db.Exec(`INSERT INTO t (v, s) VALUES (?, ?)`, i, "x")
		require.NoError(t, err)
	}
	for i := range 100 {
		var s string
		require.NoError(t, db.QueryRow(`SELECT s FROM t WHERE v = ?`, i).Scan(&s))
		assert.Equal(t, "x", s)
	}
	tx, err := db.Begin()
	require.NoError(t, err)
	for i := 100; i < 200; i++ {
		_, err := tx.Exec(`INSERT INTO t (v, s) VALUES (?, ?)`, i, "y")
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM t WHERE s = ?`, "y").Scan(&n))
	assert.Equal(t, 100, n)
	assert.EqualValues(t, 3, cc.compiled.Load(), "three texts, each compiled once over 301 runs")
}

func TestSameQueryInsideItsOwnRows(t *testing.T) {
	db, cc := openCounted(t, stmtCacheSize)
	for i := range 5 {
		_, err := db.Exec(`INSERT INTO t (v, s) VALUES (?, ?)`, i, "x")
		require.NoError(t, err)
	}
	c, err := db.Conn(context.Background())
	require.NoError(t, err)
	defer c.Close()
	const q = `SELECT v FROM t WHERE v >= ? ORDER BY v`
	rows, err := c.QueryContext(context.Background(), q, 0)
	require.NoError(t, err)
	var outer []int
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		outer = append(outer, v)
		// The same text while its kept statement steps through the rows
		// above: compiled on its own, read whole, the outer rows unmoved.
		inner, err := c.QueryContext(context.Background(), q, v)
		require.NoError(t, err)
		var got []int
		for inner.Next() {
			var w int
			require.NoError(t, inner.Scan(&w))
			got = append(got, w)
		}
		require.NoError(t, inner.Err())
		require.NoError(t, inner.Close())
		assert.Len(t, got, 5-v)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	assert.Equal(t, []int{0, 1, 2, 3, 4}, outer)

	before := cc.compiled.Load()
	var v int
	require.NoError(t, c.QueryRowContext(context.Background(), q, 3).Scan(&v))
	assert.Equal(t, 3, v)
	assert.Equal(t, before, cc.compiled.Load(), "the kept statement runs again once its rows closed")
}

func TestEvictsLeastRecentlyUsedThatIsNotBusy(t *testing.T) {
	db, cc := openCounted(t, 2)
	c, err := db.Conn(context.Background())
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	_, err = c.ExecContext(ctx, `INSERT INTO t (v, s) VALUES (1, 'a'), (2, 'b')`)
	require.NoError(t, err)
	const a, b, d = `SELECT s FROM t WHERE v = 1`, `SELECT s FROM t WHERE v = 2`, `SELECT count(*) FROM t`
	one := func(q string) string {
		var s string
		require.NoError(t, c.QueryRowContext(ctx, q).Scan(&s))
		return s
	}
	cc.compiled.Store(0)
	one(a)
	one(b)
	one(a) // a is now the most recently used
	assert.EqualValues(t, 2, cc.compiled.Load())
	one(d) // pushes out b, the least recently used
	one(a)
	assert.EqualValues(t, 3, cc.compiled.Load(), "a stayed")
	one(b)
	assert.EqualValues(t, 4, cc.compiled.Load(), "b was pushed out")

	// x's rows open: x is busy. Made the least recently used, it stays,
	// and the one used before it goes instead.
	const x = `SELECT s FROM t WHERE v >= ? ORDER BY v`
	rows, err := c.QueryContext(ctx, x, 1)
	require.NoError(t, err)
	require.True(t, rows.Next())
	assert.EqualValues(t, 5, cc.compiled.Load())
	one(b) // kept: the cache holds x and b, x the least recently used
	assert.EqualValues(t, 5, cc.compiled.Load())
	one(a) // pushes out b, not the busy x
	assert.EqualValues(t, 6, cc.compiled.Load())
	require.True(t, rows.Next(), "the open rows read on")
	var s string
	require.NoError(t, rows.Scan(&s))
	assert.Equal(t, "b", s)
	require.NoError(t, rows.Close())
	require.NoError(t, c.QueryRowContext(ctx, x, 2).Scan(&s))
	assert.Equal(t, "b", s)
	assert.EqualValues(t, 6, cc.compiled.Load(), "x was kept while busy")

	// Every kept statement busy: a new text runs on its own, kept nowhere.
	r1, err := c.QueryContext(ctx, x, 1)
	require.NoError(t, err)
	r2, err := c.QueryContext(ctx, a)
	require.NoError(t, err)
	require.True(t, r1.Next())
	require.True(t, r2.Next())
	assert.Equal(t, "b", one(b))
	assert.Equal(t, "b", one(b))
	assert.EqualValues(t, 8, cc.compiled.Load(), "b ran on its own twice, kept nowhere")
	require.NoError(t, r1.Close())
	require.NoError(t, r2.Close())
}

func TestKeptStatementsFollowSchemaChanges(t *testing.T) {
	db, _ := openCounted(t, stmtCacheSize)
	_, err := db.Exec(`INSERT INTO t (v, s) VALUES (1, 'a')`)
	require.NoError(t, err)
	cols := func() []string {
		rows, err := db.Query(`SELECT * FROM t`)
		require.NoError(t, err)
		defer rows.Close()
		c, err := rows.Columns()
		require.NoError(t, err)
		return c
	}
	assert.Equal(t, []string{"v", "s"}, cols())
	_, err = db.Exec(`ALTER TABLE t ADD COLUMN w TEXT`)
	require.NoError(t, err)
	assert.Equal(t, []string{"v", "s", "w"}, cols(), "the kept SELECT * sees the new column")
}

func TestKeptStatementRunsAgainAfterItFailed(t *testing.T) {
	db, cc := openCounted(t, stmtCacheSize)
	const ins = `INSERT INTO t (v, s) VALUES (?, ?)`
	_, err := db.Exec(ins, 1, "a")
	require.NoError(t, err)
	_, err = db.Exec(ins, 1, "again")
	require.ErrorContains(t, err, "UNIQUE constraint failed: t.v")
	_, err = db.Exec(ins, 2, "b")
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM t`).Scan(&n))
	assert.Equal(t, 2, n)
	assert.EqualValues(t, 2, cc.compiled.Load())

	_, err = db.Exec(`INSERT INTO nope VALUES (1)`)
	require.ErrorContains(t, err, "no such table: nope", "a text that does not compile says why")
}

func TestStatementCacheColumnTypes(t *testing.T) {
	db, _ := openCounted(t, stmtCacheSize)
	rows, err := db.Query(`SELECT v, s FROM t`)
	require.NoError(t, err)
	defer rows.Close()
	ct, err := rows.ColumnTypes()
	require.NoError(t, err)
	require.Len(t, ct, 2)
	assert.Equal(t, "INTEGER", ct[0].DatabaseTypeName())
	assert.Equal(t, "TEXT", ct[1].DatabaseTypeName())
}
