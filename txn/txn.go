package txn

import "context"

// Runner runs functions in transactions of one database.
type Runner interface {
	// InTx runs fn in a transaction: the ctx fn receives carries it, and
	// the writes of stores of the same database made with that ctx join
	// it. The transaction commits when fn returns nil and rolls back
	// otherwise; InTx returns fn's error, or the commit's.
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}

// RunnerFunc adapts a function to [Runner].
type RunnerFunc func(ctx context.Context, fn func(ctx context.Context) error) error

// InTx implements [Runner].
func (f RunnerFunc) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return f(ctx, fn)
}
