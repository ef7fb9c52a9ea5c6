// Package txchain keeps the transactions a context carries, for the
// transaction runners of each database driver (txn/sqltxn, txn/pgtxn):
// the innermost first, each with the database handle it belongs to and
// the functions to run once a runner commits it; and the runners' InTx
// ([Chain.InTx]) over a [Driver] of each.
package txchain

import (
	"context"
	"sync"
)

// Chain is the chain of one driver: D is its database handle (a pool,
// a *sql.DB), T its transaction. Each Chain has a context key of its own.
type Chain[D comparable, T any] struct{ k key }

type key struct{ id *byte }

// New returns a Chain with a context key of its own.
func New[D comparable, T any]() Chain[D, T] { return Chain[D, T]{key{new(byte)}} }

// open is one transaction, linked to the transactions ctx carried when
// it was added.
type open[D comparable, T any] struct {
	// hooks run after the commit of a transaction a runner began; nil for
	// one the application began (and commits) itself.
	hooks  *Hooks
	db     D
	tx     T
	parent *open[D, T]
}

// With returns a ctx that carries tx of db innermost, with h to run after
// its commit (nil for a transaction the application commits itself).
func (c Chain[D, T]) With(ctx context.Context, db D, tx T, h *Hooks) context.Context {
	parent, _ := ctx.Value(c.k).(*open[D, T])
	return context.WithValue(ctx, c.k, &open[D, T]{db: db, tx: tx, parent: parent, hooks: h})
}

// Innermost returns the innermost transaction ctx carries.
func (c Chain[D, T]) Innermost(ctx context.Context) (T, bool) {
	if o, _ := ctx.Value(c.k).(*open[D, T]); o != nil {
		return o.tx, true
	}
	var zero T
	return zero, false
}

// Lookup returns db's transaction in ctx and whether there is one, and
// whether ctx carries any transaction of this chain at all.
func (c Chain[D, T]) Lookup(ctx context.Context, db D) (tx T, found, any bool) {
	o, _ := ctx.Value(c.k).(*open[D, T])
	for p := o; p != nil; p = p.parent {
		if p.db == db {
			return p.tx, true, true
		}
	}
	return tx, false, o != nil
}

// AfterCommit registers f to run after the commit of db's transaction in
// ctx, and reports false (registering nothing) when ctx carries no
// transaction of db that a runner began.
func (c Chain[D, T]) AfterCommit(ctx context.Context, db D, f func()) bool {
	o, _ := ctx.Value(c.k).(*open[D, T])
	for ; o != nil; o = o.parent {
		if o.db == db {
			break
		}
	}
	if o == nil || o.hooks == nil {
		return false
	}
	o.hooks.mu.Lock()
	defer o.hooks.mu.Unlock()
	o.hooks.fs = append(o.hooks.fs, f)
	return true
}

// Hooks are the functions to run after a commit.
type Hooks struct {
	mu sync.Mutex
	fs []func()
}

// Run runs the registered functions, in the order they were registered.
func (h *Hooks) Run() {
	h.mu.Lock()
	fs := h.fs
	h.fs = nil
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Retry runs once up to max times while it fails with an error transient
// calls transient and ctx has not ended, and returns its last error.
func Retry(ctx context.Context, max int, transient func(error) bool, once func() error) error {
	var err error
	for attempt := 1; attempt <= max; attempt++ {
		err = once()
		if err == nil || transient == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}
