package sqlitestore

import (
	"database/sql/driver"
	"reflect"
)

// stmtCacheSize is how many compiled statements a connection keeps. The
// store runs a few dozen texts (the INSERTs of 1 to 25 rows among them);
// a host's own statements on the same database (package txn, the tables
// of sqlitedb) share the rest, least recently used first out.
const stmtCacheSize = 128

// stmtCache keeps a connection's compiled statements by their text, so
// that a statement runs without being parsed and planned again: SQLite
// compiles a text into a program for its virtual machine, which was a
// quarter of the process's CPU where many idle groups renewed their
// leases, and the driver runs a kept statement again after a reset. A
// connection is used by one goroutine at a time (database/sql hands it
// out so), so the cache takes no lock.
//
// A statement whose rows are open is busy: the same text asked for
// meanwhile runs compiled on its own, once, and is not kept.
type stmtCache struct {
	size  int
	byKey map[string]*cachedStmt
	// head is the most recently used statement, head.prev the least: a
	// ring, so that moving a statement to the front is four assignments.
	head *cachedStmt
}

type cachedStmt struct {
	text       string
	st         driver.Stmt
	busy       bool
	prev, next *cachedStmt
}

func newStmtCache(size int) *stmtCache {
	return &stmtCache{size: size, byKey: make(map[string]*cachedStmt)}
}

// get returns the statement kept for text, now the most recently used, or
// nil.
func (c *stmtCache) get(text string) *cachedStmt {
	cs := c.byKey[text]
	if cs != nil && c.head != cs {
		c.unlink(cs)
		c.pushFront(cs)
	}
	return cs
}

// room reports whether put can keep one more statement: the cache is not
// full, or holds one that is not busy.
func (c *stmtCache) room() bool {
	return len(c.byKey) < c.size || c.victim() != nil
}

// victim returns the least recently used statement that is not busy, or
// nil.
func (c *stmtCache) victim() *cachedStmt {
	if c.head == nil {
		return nil
	}
	for v := c.head.prev; ; v = v.prev {
		if !v.busy {
			return v
		}
		if v == c.head {
			return nil
		}
	}
}

// put keeps st for text as the most recently used and returns it, with
// the statement it pushed out to make room (to be closed by the caller),
// or nil. The caller has made sure of room.
func (c *stmtCache) put(text string, st driver.Stmt) (*cachedStmt, driver.Stmt) {
	var evicted driver.Stmt
	if len(c.byKey) >= c.size {
		v := c.victim()
		c.unlink(v)
		delete(c.byKey, v.text)
		evicted = v.st
	}
	cs := &cachedStmt{text: text, st: st}
	c.byKey[text] = cs
	c.pushFront(cs)
	return cs, evicted
}

// drain empties the cache and returns its statements, for the connection
// to close them before it closes.
func (c *stmtCache) drain() []driver.Stmt {
	out := make([]driver.Stmt, 0, len(c.byKey))
	for _, cs := range c.byKey {
		out = append(out, cs.st)
	}
	clear(c.byKey)
	c.head = nil
	return out
}

func (c *stmtCache) pushFront(cs *cachedStmt) {
	if c.head == nil {
		cs.prev, cs.next = cs, cs
	} else {
		cs.next, cs.prev = c.head, c.head.prev
		c.head.prev.next = cs
		c.head.prev = cs
	}
	c.head = cs
}

func (c *stmtCache) unlink(cs *cachedStmt) {
	if cs.next == cs {
		c.head = nil
	} else {
		cs.prev.next, cs.next.prev = cs.next, cs.prev
		if c.head == cs {
			c.head = cs.next
		}
	}
	cs.prev, cs.next = nil, nil
}

// cachedRows are the rows of a kept statement, which is busy until they
// close. They answer for their columns' types as the driver's rows do.
type cachedRows struct {
	driver.Rows
	cs *cachedStmt
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	if r.cs != nil {
		r.cs.busy = false
		r.cs = nil
	}
	return err
}

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *cachedRows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *cachedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *cachedRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}
