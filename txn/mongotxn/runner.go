package mongotxn

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/promethean/promlib/txn"
)

// ErrInvalid is wrapped by errors about bad arguments; the message names
// the argument.
var ErrInvalid = errors.New("mongotxn: invalid argument")

// Runner runs functions in transactions of one MongoDB client.
type Runner struct {
	client *mongo.Client
}

var _ txn.Runner = (*Runner)(nil)

// NewRunner returns a runner on client. It does no I/O.
func NewRunner(client *mongo.Client) (*Runner, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: client: nil", ErrInvalid)
	}
	return &Runner{client: client}, nil
}

// InTx implements [txn.Runner] with a session's WithTransaction.
func (r *Runner) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if s := mongo.SessionFromContext(ctx); s != nil && s.TransactionRunning() && s.Client() == r.client {
		return fn(ctx) // join the caller's transaction
	}
	sess, err := r.client.StartSession()
	if err != nil {
		return fmt.Errorf("mongotxn: start session: %w", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		return nil, fn(ctx)
	})
	return err
}

// InTransaction reports whether ctx carries a session in a transaction:
// writes made with it become visible only when the transaction commits.
func InTransaction(ctx context.Context) bool {
	s := mongo.SessionFromContext(ctx)
	return s != nil && s.TransactionRunning()
}
