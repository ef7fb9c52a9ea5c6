package sqltxn

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/promethean/promlib/txn"
	"github.com/promethean/promlib/txn/internal/txchain"
)

// DefaultMaxAttempts is how many times InTx runs a function whose
// transaction failed with an error Config.Retry calls transient.
const DefaultMaxAttempts = 3

// Config configures a [Runner]. The zero value means the defaults.
type Config struct {
	// TxOptions are those of every transaction (isolation level, read
	// only); nil means the driver's default.
	TxOptions *sql.TxOptions
	// Retry reports whether a transaction that failed with err may run
	// again (a serialization failure, a deadlock, a busy database): the
	// error codes are the driver's, so nil means never.
	Retry func(err error) bool
	// MaxAttempts bounds the runs of one InTx when Retry says so (default
	// 3).
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

// Runner runs functions in transactions of one *sql.DB.
type Runner struct {
	db     *sql.DB
	cfg    Config
	driver txchain.Driver[*sql.Tx]
}

var _ txn.Runner = (*Runner)(nil)

// NewRunner returns a runner of transactions on db. It does no I/O.
func NewRunner(db *sql.DB, cfg Config) (*Runner, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: db: nil", ErrInvalid)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Runner{db: db, cfg: cfg, driver: txchain.Driver[*sql.Tx]{
		Name:     "sqltxn",
		Begin:    func(ctx context.Context) (*sql.Tx, error) { return db.BeginTx(ctx, cfg.TxOptions) },
		Commit:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		Rollback: func(_ context.Context, tx *sql.Tx) { _ = tx.Rollback() },
	}}, nil
}

// DB returns the database the runner begins transactions on.
func (r *Runner) DB() *sql.DB { return r.db }

// chain keeps the transactions a ctx carries, innermost first.
var chain = txchain.New[*sql.DB, *sql.Tx]()

// InTx implements [txn.Runner]: it begins a transaction on the runner's
// database, runs fn with a ctx that carries it, and commits when fn
// returns nil and ctx has not ended, or rolls back. Inside a transaction
// of the same database it joins it: fn runs in the caller's transaction,
// which commits or rolls back with the caller's.
func (r *Runner) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return chain.InTx(ctx, r.db, r.driver, r.cfg.MaxAttempts, r.cfg.Retry, fn)
}

// AfterCommit registers f to run after the transaction that ctx carries
// on db commits (in InTx, once the commit succeeded; never after a
// rollback), e.g. to wake a worker that reads what the transaction
// wrote. It reports false, registering nothing, when ctx carries no
// transaction of db that a Runner began: without one there is nothing
// to wait for, and the commit of a transaction passed in with WithTx is
// the application's.
func AfterCommit(ctx context.Context, db *sql.DB, f func()) bool {
	return chain.AfterCommit(ctx, db, f)
}

// WithTx returns a ctx that carries tx, a transaction the caller began on
// db itself: the stores of db write in it, and a Runner of db joins
// it. The caller commits or rolls it back.
func WithTx(ctx context.Context, db *sql.DB, tx *sql.Tx) context.Context {
	return chain.With(ctx, db, tx, nil)
}

// Tx returns the innermost transaction ctx carries (begun by a [Runner],
// or given with [WithTx]), for the caller's own statements in it.
func Tx(ctx context.Context) (*sql.Tx, bool) {
	return chain.Innermost(ctx)
}

// From returns the transaction ctx carries on db, for a store of db to
// write in: nil when ctx carries no transaction, and [ErrOtherDB] when it
// carries transactions of other databases only (writing outside them
// would break the caller's atomicity silently).
func From(ctx context.Context, db *sql.DB) (*sql.Tx, error) {
	return chain.From(ctx, db, ErrOtherDB)
}

// InTransaction reports whether ctx carries a transaction (begun by a
// [Runner], or given with [WithTx]).
func InTransaction(ctx context.Context) bool {
	_, ok := Tx(ctx)
	return ok
}
