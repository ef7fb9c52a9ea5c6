package sqlstore

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"strings"

	"github.com/promethean/promlib/event"
)

// appendReq is one Append waiting for the group commit.
type appendReq struct {
	topic string
	recs  []event.Record
	out   []event.Record
	err   error
	done  chan struct{}
}

// Append implements [event.Store]. Concurrent appends (of any topics) are
// written together in one transaction by the store's writer goroutine: the
// group commit. A transaction that fails is retried one append at a time,
// so that one append's failure is its own.
func (s *Store) Append(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range recs {
		if recs[i].Topic != topic {
			return nil, invalid("topic", "record %d has topic %q in an append to %q", i, recs[i].Topic, topic)
		}
		if recs[i].ID == "" {
			return nil, invalid("id", "record %d has no id", i)
		}
		if err := checkPartition(recs[i].Partition); err != nil {
			return nil, err
		}
	}
	if len(recs) == 0 {
		return []event.Record{}, nil
	}
	req := &appendReq{topic: topic, recs: recs, done: make(chan struct{})}
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.ctx.Done():
		return nil, s.errorf("append to %q: %w", topic, event.ErrClosed)
	}
	select {
	case <-req.done:
		return req.out, req.err
	case <-ctx.Done():
		return nil, ctx.Err() // the append may still be stored: appending again is safe
	case <-s.ctx.Done():
		return nil, s.errorf("append to %q: %w", topic, event.ErrClosed)
	}
}

// appender is the writer goroutine: it takes the appends waiting, up to
// MaxBatch records (at least one append), and writes them in one
// transaction.
func (s *Store) appender() {
	defer s.wg.Done()
	for {
		var first *appendReq
		select {
		case <-s.ctx.Done():
			return
		case first = <-s.reqs:
		}
		batch, n := []*appendReq{first}, len(first.recs)
	more:
		for n < s.cfg.MaxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
				n += len(r.recs)
			default:
				break more
			}
		}
		s.commit(batch)
	}
}

func (s *Store) commit(batch []*appendReq) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.WriteTimeout)
	defer cancel()
	heads, err := s.writeBatch(ctx, batch)
	if err != nil && len(batch) > 1 {
		for _, r := range batch {
			var h map[string]uint64
			h, r.err = s.writeBatch(ctx, []*appendReq{r})
			for t, v := range h {
				s.announce(t, v)
			}
			close(r.done)
		}
		return
	}
	for _, r := range batch {
		r.err = err
		close(r.done)
	}
	for t, h := range heads {
		s.announce(t, h)
	}
}

// writeBatch writes the appends of reqs in one transaction and returns the
// new head of each topic that got records.
func (s *Store) writeBatch(ctx context.Context, reqs []*appendReq) (map[string]uint64, error) {
	byTopic := make(map[string][]*appendReq)
	for _, r := range reqs {
		byTopic[r.topic] = append(byTopic[r.topic], r)
	}
	// Counter rows are locked in topic order, so that transactions of
	// several processes cannot deadlock.
	topics := slices.Sorted(maps.Keys(byTopic))
	heads := make(map[string]uint64)
	outs := make(map[*appendReq][]event.Record, len(reqs))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var grown []string
		for _, topic := range topics {
			head, err := s.appendTopic(ctx, tx, topic, byTopic[topic], outs)
			if err != nil {
				return s.errorf("append to %q: %w", topic, err)
			}
			if head > 0 {
				heads[topic] = head
				grown = append(grown, topic)
			}
		}
		if s.d.InAppend != nil && len(grown) > 0 {
			if err := s.d.InAppend(ctx, tx, grown); err != nil {
				return s.errorf("append: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		if s.ctx.Err() != nil {
			err = s.errorf("append: %w (%w)", event.ErrClosed, err)
		}
		return nil, err
	}
	for r, out := range outs {
		r.out = out
	}
	return heads, nil
}

// lockHead locks the counter row of topic (creating it) and returns the
// head.
func lockHead(ctx context.Context, tx *sql.Tx, topic string) (int64, error) {
	if _, err := tx.ExecContext(ctx, `INSERT INTO promlib_topics (topic, head, floor) VALUES ($1, 0, 1) ON CONFLICT (topic) DO NOTHING`, topic); err != nil {
		return 0, err
	}
	var head int64
	err := tx.QueryRowContext(ctx, `UPDATE promlib_topics SET head = head WHERE topic = $1 RETURNING head`, topic).Scan(&head)
	return head, err
}

// maxRows bounds the rows of one INSERT, so that its parameters stay under
// SQLite's limit of 32766 and PostgreSQL's of 65535.
const maxRows = 500

// appendTopic writes the records of reqs, all of topic, with the counter
// row locked. It returns the new head, 0 if nothing new was stored.
func (s *Store) appendTopic(ctx context.Context, tx *sql.Tx, topic string, reqs []*appendReq, outs map[*appendReq][]event.Record) (uint64, error) {
	head, err := lockHead(ctx, tx, topic)
	if err != nil {
		return 0, err
	}
	var ids []string
	for _, r := range reqs {
		for i := range r.recs {
			ids = append(ids, r.recs[i].ID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	stored, err := s.lookupIDs(ctx, tx, topic, ids)
	if err != nil {
		return 0, err
	}
	var fresh []*event.Record
	for _, r := range reqs {
		out := make([]event.Record, len(r.recs))
		for i := range r.recs {
			in := &r.recs[i]
			if old, ok := stored[in.ID]; ok {
				out[i] = old
				continue
			}
			head++
			out[i] = cloneRecord(in)
			out[i].Seq = uint64(head)
			stored[in.ID] = out[i]
			fresh = append(fresh, &out[i])
		}
		outs[r] = out
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	added := len(fresh)
	args := make([]any, 0, min(len(fresh), maxRows)*nRecordCols)
	for len(fresh) > 0 {
		chunk := fresh[:min(len(fresh), maxRows)]
		fresh = fresh[len(chunk):]
		var b strings.Builder
		b.WriteString(`INSERT INTO promlib_events (topic, ` + recordCols + `) VALUES `)
		placeholders(&b, len(chunk), nRecordCols, 0)
		args = args[:0]
		for _, r := range chunk {
			if args, err = recordArgs(args, r, int64(r.Seq)); err != nil {
				return 0, err
			}
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return 0, err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE promlib_topics SET head = $2, events = events + $3 WHERE topic = $1`, topic, head, added); err != nil {
		return 0, err
	}
	return uint64(head), nil
}

// lookupIDs returns the stored records of topic among ids.
func (s *Store) lookupIDs(ctx context.Context, tx *sql.Tx, topic string, ids []string) (map[string]event.Record, error) {
	found := make(map[string]event.Record)
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), maxRows)]
		ids = ids[len(chunk):]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, topic)
		for _, id := range chunk {
			args = append(args, id)
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+recordCols+` FROM promlib_events WHERE topic = $1 AND id IN (`+inList(len(chunk), 1)+`)`, args...)
		if err != nil {
			return nil, err
		}
		recs, err := s.scanRecords(rows, topic, 0)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			found[r.ID] = r
		}
	}
	return found, nil
}

// cloneRecord copies what the caller may reuse.
func cloneRecord(r *event.Record) event.Record {
	c := *r
	c.Payload = append([]byte{}, r.Payload...)
	c.Headers = maps.Clone(r.Headers)
	c.CausedBy = slices.Clone(r.CausedBy)
	c.Tags = slices.Clone(r.Tags)
	return c
}
