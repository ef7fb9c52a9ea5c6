package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"

	"modernc.org/sqlite"
)

// The driver answers a statement's context ending by interrupting the
// connection (sqlite3_interrupt), which acts on whatever the connection
// runs at that moment: a statement that has already finished lets the
// interrupt fall on the next statement of the pooled connection, which then
// fails with "interrupted (9)" although its own context is live. The store
// therefore never hands the driver a context that can end: every statement
// checks its context before it starts and then runs detached from it.
// SQLite statements here are short; waiting for a lock is bounded by the
// busy timeout.

// openDB opens dsn through the driver, with statements detached from their
// contexts' ends.
func openDB(dsn string) *sql.DB { return sql.OpenDB(connector{dsn: dsn}) }

type connector struct{ dsn string }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dc, err := c.Driver().Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: dc, stmts: newStmtCache(stmtCacheSize)}, nil
}

func (connector) Driver() driver.Driver { return &sqlite.Driver{} }

// conn is a driver connection whose statements run detached from their
// contexts' ends, and keep their compiled form (see stmtCache).
type conn struct {
	driver.Conn
	stmts *stmtCache
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(context.WithoutCancel(ctx), opts)
	}
	//lint:ignore SA1019 the driver has no BeginTx
	return c.Conn.Begin()
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var st driver.Stmt
	var err error
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(context.WithoutCancel(ctx), query)
	} else {
		st, err = c.Conn.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return stmt{st}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cs, err := c.cached(query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		e, ok := c.Conn.(driver.ExecerContext)
		if !ok {
			return nil, driver.ErrSkip
		}
		return e.ExecContext(context.WithoutCancel(ctx), query, args)
	}
	// The run ends within the call (the driver steps the statement to
	// its end and resets it): nothing else can ask for it meanwhile.
	return cs.st.(driver.StmtExecContext).ExecContext(context.WithoutCancel(ctx), args)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cs, err := c.cached(query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		q, ok := c.Conn.(driver.QueryerContext)
		if !ok {
			return nil, driver.ErrSkip
		}
		return q.QueryContext(context.WithoutCancel(ctx), query, args)
	}
	rs, err := cs.st.(driver.StmtQueryContext).QueryContext(context.WithoutCancel(ctx), args)
	if err != nil {
		return nil, err
	}
	cs.busy = true // until the rows close: the statement steps through them
	return &cachedRows{Rows: rs, cs: cs}, nil
}

// cached returns the compiled statement of query on this connection,
// compiling and keeping it on first use, or nil when query is to run as
// one text of its own: its statement is in use by rows still open (the
// same query inside the loop over its own rows), every kept statement is,
// or the driver cannot run the text from a kept statement.
func (c *conn) cached(query string) (*cachedStmt, error) {
	if cs := c.stmts.get(query); cs != nil {
		if cs.busy {
			return nil, nil
		}
		return cs, nil
	}
	p, ok := c.Conn.(driver.ConnPrepareContext)
	if !ok || !c.stmts.room() {
		return nil, nil
	}
	st, err := p.PrepareContext(context.Background(), query)
	if err != nil {
		return nil, err
	}
	_, canExec := st.(driver.StmtExecContext)
	_, canQuery := st.(driver.StmtQueryContext)
	if !canExec || !canQuery {
		return nil, st.Close()
	}
	cs, evicted := c.stmts.put(query, st)
	if evicted != nil {
		_ = evicted.Close()
	}
	return cs, nil
}

// Close closes the kept statements, then the connection.
func (c *conn) Close() error {
	for _, st := range c.stmts.drain() {
		_ = st.Close()
	}
	return c.Conn.Close()
}

func (c *conn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(context.WithoutCancel(ctx))
	}
	return nil
}

func (c *conn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// stmt is a prepared statement run detached from its contexts' ends.
type stmt struct{ driver.Stmt }

func (s stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(context.WithoutCancel(ctx), args)
	}
	return nil, driver.ErrSkip
}

func (s stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(context.WithoutCancel(ctx), args)
	}
	return nil, driver.ErrSkip
}
