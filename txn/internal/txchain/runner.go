package txchain

import (
	"context"
	"fmt"
)

// Driver is what a runner needs of a database driver: to begin a
// transaction of T on its database handle, and to commit and roll back
// one.
type Driver[T any] struct {
	// Name prefixes the errors of Begin and Commit ("sqltxn: begin: ...").
	Name     string
	Begin    func(ctx context.Context) (T, error)
	Commit   func(ctx context.Context, tx T) error
	Rollback func(ctx context.Context, tx T)
}

// InTx runs fn in a transaction of db, the InTx of the runners: inside a
// transaction of db that ctx carries it joins it (fn runs in the caller's
// transaction, which commits or rolls back with the caller's); otherwise
// it begins one with d, runs fn with a ctx that carries it, and commits
// when fn returns nil and ctx has not ended, or rolls back. A failure, of
// a statement or of the commit, that transient calls transient runs fn
// again in a new transaction, up to max runs ([Retry]). The functions
// registered with [Chain.AfterCommit] run once the commit succeeded.
func (c Chain[D, T]) InTx(ctx context.Context, db D, d Driver[T], max int, transient func(error) bool, fn func(ctx context.Context) error) error {
	if _, found, _ := c.Lookup(ctx, db); found {
		return fn(ctx)
	}
	return Retry(ctx, max, transient, func() error { return c.once(ctx, db, d, fn) })
}

func (c Chain[D, T]) once(ctx context.Context, db D, d Driver[T], fn func(ctx context.Context) error) error {
	tx, err := d.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", d.Name, err)
	}
	h := &Hooks{}
	err = fn(c.With(ctx, db, tx, h))
	if err == nil {
		err = ctx.Err() // a ctx that ended before the commit rolls back
	}
	if err != nil {
		d.Rollback(ctx, tx)
		return err
	}
	if err := d.Commit(ctx, tx); err != nil {
		return fmt.Errorf("%s: commit: %w", d.Name, err)
	}
	h.Run()
	return nil
}

// From returns the transaction ctx carries on db, for a store of db to
// write in: the zero T when ctx carries no transaction of this chain, and
// errOther when it carries transactions of other handles only (writing
// outside them would break the caller's atomicity silently).
func (c Chain[D, T]) From(ctx context.Context, db D, errOther error) (T, error) {
	tx, found, some := c.Lookup(ctx, db)
	if !found && some {
		var zero T
		return zero, errOther
	}
	return tx, nil
}
