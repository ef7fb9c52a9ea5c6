package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/promethean/promlib/event"
)

// MaxRenewBatch bounds the renewals of one transaction of the renewer, so
// that the transaction, which holds the database's write lock, stays
// short: 256 renewals are some 512 statements.
const MaxRenewBatch = 256

// renewBatched hands r to the renewer goroutine and waits for its
// answer. A caller whose ctx ends gets ctx.Err(): its renewal may still be
// written (the caller of Renew assumes nothing on an error).
func (s *Store) renewBatched(ctx context.Context, r *renewReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.done = make(chan struct{})
	select {
	case s.renews <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ctx.Done():
		return event.ErrClosed
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ctx.Done():
		return event.ErrClosed
	}
}

// renewer is the goroutine that writes the renewals of a dialect with
// BatchRenewals: it takes the renewals waiting, up to MaxRenewBatch (at
// least one), and writes them in one transaction (writeRenewals), the
// group commit of renewals. Thousands of groups each renewing every few
// seconds then cost the database a few commits a second, not one each.
func (s *Store) renewer() {
	defer s.wg.Done()
	for {
		var first *renewReq
		select {
		case <-s.ctx.Done():
			return
		case first = <-s.renews:
		}
		batch := []*renewReq{first}
	more:
		for len(batch) < MaxRenewBatch {
			select {
			case r := <-s.renews:
				batch = append(batch, r)
			default:
				break more
			}
		}
		s.writeRenewals(batch)
	}
}

// writeRenewals writes the renewals of batch in one transaction, each as
// a lone Renew writes it (renewIn), in the order they came, and answers
// each. A renewal refused for the member's tombstone wrote nothing: it
// gets errLeft and the others go on. A renewal whose caller has given up
// is not written. An error of any other statement, or of the commit,
// fails every renewal of the batch: the transaction is rolled back, none
// is applied.
func (s *Store) writeRenewals(batch []*renewReq) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.WriteTimeout)
	defer cancel()
	var todo []*renewReq
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		todo = append(todo, r)
	}
	if len(todo) == 0 {
		return
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, r := range todo {
			r.err = s.renewIn(ctx, tx, r)
			if r.err != nil && !errors.Is(r.err, errLeft) {
				return r.err
			}
		}
		return nil
	})
	if err != nil && s.ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", event.ErrClosed, err)
	}
	for _, r := range todo {
		if err != nil {
			r.err = err
		}
		close(r.done)
	}
}
