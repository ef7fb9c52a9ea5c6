package pgtxn

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/txn"
	"github.com/promethean/promlib/txn/internal/txchain"
)

// DefaultMaxAttempts is how many times InTx runs a function whose
// transaction failed with a serialization failure or a deadlock.
const DefaultMaxAttempts = 5

// Config configures a [Runner]. The zero value means the defaults.
type Config struct {
	// TxOptions are those of every transaction (default: the server's,
	// READ COMMITTED unless configured otherwise).
	TxOptions pgx.TxOptions
	// MaxAttempts bounds the runs of one InTx whose transaction failed
	// with a serialization failure (40001) or a deadlock (40P01)
	// (default 5).
	MaxAttempts int
}

func (c *Config) setDefaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
}

// Validate reports every problem of c, joined.
func (c *Config) Validate() error {
	if c.MaxAttempts < 0 {
		return fmt.Errorf("%w: MaxAttempts: %d, want at least 1", ErrInvalid, c.MaxAttempts)
	}
	return nil
}

// Runner runs functions in transactions of one pgx pool.
type Runner struct {
	pool   *pgxpool.Pool
	cfg    Config
	driver txchain.Driver[pgx.Tx]
}

var _ txn.Runner = (*Runner)(nil)

// NewRunner returns a runner of transactions on pool. It does no I/O.
func NewRunner(pool *pgxpool.Pool, cfg Config) (*Runner, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pool: nil", ErrInvalid)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Runner{pool: pool, cfg: cfg, driver: txchain.Driver[pgx.Tx]{
		Name:     "pgtxn",
		Begin:    func(ctx context.Context) (pgx.Tx, error) { return pool.BeginTx(ctx, cfg.TxOptions) },
		Commit:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		Rollback: func(ctx context.Context, tx pgx.Tx) { _ = tx.Rollback(context.WithoutCancel(ctx)) },
	}}, nil
}

// Pool returns the pool the runner begins transactions on.
func (r *Runner) Pool() *pgxpool.Pool { return r.pool }

// chain keeps the transactions a ctx carries, innermost first.
var chain = txchain.New[*pgxpool.Pool, pgx.Tx]()

// InTx implements [txn.Runner]: it begins a transaction on the runner's
// pool, runs fn with a ctx that carries it, and commits when fn returns
// nil and ctx has not ended, or rolls back. A serialization failure or a
// deadlock, of a statement or of the commit, runs fn again in a new
// transaction, up to Config.MaxAttempts runs. Inside a transaction of the
// same pool it joins it: fn runs in the caller's transaction, which
// commits or rolls back with the caller's.
func (r *Runner) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return chain.InTx(ctx, r.pool, r.driver, r.cfg.MaxAttempts, Transient, fn)
}

// AfterCommit registers f to run after the transaction that ctx carries
// on pool commits (in InTx, once the commit succeeded; never after a
// rollback), e.g. to wake a worker that reads what the transaction
// wrote. It reports false, registering nothing, when ctx carries no
// transaction of pool that a Runner began: without one there is nothing
// to wait for, and the commit of a transaction passed in with WithTx is
// the application's.
func AfterCommit(ctx context.Context, pool *pgxpool.Pool, f func()) bool {
	return chain.AfterCommit(ctx, pool, f)
}

// Transient reports whether err is a serialization failure (40001) or a
// deadlock (40P01): the transaction may succeed when run again.
func Transient(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// WithTx returns a ctx that carries tx, a transaction the caller began on
// pool itself: the stores of pool write in it, and a Runner of pool joins
// it. The caller commits or rolls it back.
func WithTx(ctx context.Context, pool *pgxpool.Pool, tx pgx.Tx) context.Context {
	return chain.With(ctx, pool, tx, nil)
}

// Tx returns the innermost transaction ctx carries (begun by a [Runner],
// or given with [WithTx]), for the caller's own statements in it.
func Tx(ctx context.Context) (pgx.Tx, bool) {
	return chain.Innermost(ctx)
}

// From returns the transaction ctx carries on pool, for a store on pool
// to write in: nil when ctx carries no transaction, and [ErrOtherPool]
// when it carries transactions of other pools only (writing outside them
// would break the caller's atomicity silently).
func From(ctx context.Context, pool *pgxpool.Pool) (pgx.Tx, error) {
	return chain.From(ctx, pool, ErrOtherPool)
}

// InTransaction reports whether ctx carries a transaction (begun by a
// [Runner], or given with [WithTx]).
func InTransaction(ctx context.Context) bool {
	_, ok := Tx(ctx)
	return ok
}
