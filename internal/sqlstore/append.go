package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
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

var _ event.GroupCommitter = (*Store)(nil)

// GroupCommits implements [event.GroupCommitter]: concurrent appends are
// written together (see Append).
func (s *Store) GroupCommits() bool { return true }

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
	// The records are copied here, by the caller, not by the writer: an
	// Append whose ctx ends returns while the writer may still read its
	// records, and the caller may then reuse its slice (a Publisher does)
	// and payloads.
	own := make([]event.Record, len(recs))
	for i := range recs {
		own[i] = cloneRecord(&recs[i])
	}
	req := &appendReq{topic: topic, recs: own, done: make(chan struct{})}
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
	var heads map[string]uint64
	outs := make(map[*appendReq][]event.Record, len(reqs))
	write := func(lookup bool) error {
		heads = make(map[string]uint64)
		if !lookup && len(topics) == 1 {
			if done, err := s.appendOneStatement(ctx, topics[0], byTopic[topics[0]], heads, outs); done {
				if err != nil {
					err = s.errorf("append to %q: %w", topics[0], err)
				}
				return err
			}
		}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			return s.writeTopics(ctx, tx, topics, byTopic, lookup, heads, outs)
		})
	}
	err := write(false)
	if errors.Is(err, errLookUp) {
		err = write(true)
	}
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

// errLookUp aborts an append transaction whose optimistic insert failed:
// it is written again, looking the ids up first.
var errLookUp = errors.New("an insert failed: look the ids up")

// writeTopics writes the appends of each topic in tx, filling heads and
// outs.
func (s *Store) writeTopics(ctx context.Context, tx *sql.Tx, topics []string, byTopic map[string][]*appendReq, lookup bool,
	heads map[string]uint64, outs map[*appendReq][]event.Record) error {
	for _, topic := range topics {
		head, err := s.appendTopic(ctx, tx, topic, byTopic[topic], lookup, outs)
		if err != nil {
			return s.errorf("append to %q: %w", topic, err)
		}
		if head > 0 {
			heads[topic] = head
		}
	}
	return nil
}

// lockHead locks the counter row of topic (creating it) and returns the
// head, in one statement: an upsert that sets head = head takes the row's
// lock (in PostgreSQL it waits for another transaction's, then reads the
// head that one committed).
func lockHead(ctx context.Context, tx *sql.Tx, topic string) (int64, error) {
	var head int64
	err := tx.QueryRowContext(ctx, `INSERT INTO promlib_topics (topic, head, floor) VALUES ($1, 0, 1)
		ON CONFLICT (topic) DO UPDATE SET head = promlib_topics.head RETURNING head`, topic).Scan(&head)
	return head, err
}

// reserve locks the counter row of topic (creating it), advances its head
// by added records of size bytes and returns the head before them, in one
// statement; the dialect's Notify runs in it.
func (s *Store) reserve(ctx context.Context, tx *sql.Tx, topic string, added int, size int64) (int64, error) {
	q := `INSERT INTO promlib_topics (topic, head, floor, events, bytes) VALUES ($1, $2, 1, $2, $3)
		ON CONFLICT (topic) DO UPDATE SET head = promlib_topics.head + $2, events = promlib_topics.events + $2, bytes = promlib_topics.bytes + $3
		RETURNING head - $2`
	var head int64
	dest := []any{&head}
	if s.d.Notify != "" {
		q += ", " + s.d.Notify
		dest = append(dest, new(any))
	}
	err := tx.QueryRowContext(ctx, q, topic, int64(added), size).Scan(dest...)
	return head, err
}

// maxRows bounds the rows of one INSERT, so that its parameters stay under
// SQLite's limit of 32766 and PostgreSQL's of 65535.
const maxRows = 500

// Rows of one INSERT of the group commit (Dialect.InsertRows): 500 at
// most, and the rows of the raw multi-row INSERTs the bench measures
// PostgreSQL against (its store inserts the columns' arrays instead, see
// Dialect.Columns); on SQLite 25 (300 parameters), which measured fastest
// between 1 and 1000, as its driver binds parameters in time quadratic in
// their number.
const (
	MaxInsertRows    = maxRows
	SQLiteInsertRows = 25
)

// appendTopic writes the records of reqs, all of topic, with the counter
// row locked. It returns the new head, 0 if nothing new was stored.
//
// Most appends carry ids the topic does not hold: unless lookup is set,
// the records are inserted at once, and if an insert fails, typically on
// the unique (topic, id) index because an id was stored already (a
// retried publish), appendTopic returns errLookUp: the transaction is
// rolled back and written again with lookup set, which looks the ids up
// first, so that seqs stay contiguous and a stored id returns its record;
// an error of another cause comes again there. Looking the ids up on every
// append would cost an index probe per record, and PostgreSQL's planner
// chooses a scan of the topic for a long IN list, a cost that grows with
// the topic. A plain INSERT also costs PostgreSQL less than one with ON
// CONFLICT DO NOTHING (a speculative insertion per row), and rolling the
// rare failure back whole costs less than a savepoint in every
// transaction.
func (s *Store) appendTopic(ctx context.Context, tx *sql.Tx, topic string, reqs []*appendReq, lookup bool, outs map[*appendReq][]event.Record) (uint64, error) {
	var ids []string
	for _, r := range reqs {
		for i := range r.recs {
			ids = append(ids, r.recs[i].ID)
		}
	}
	slices.Sort(ids)
	n := len(ids)
	ids = slices.Compact(ids)
	if !lookup && len(ids) == n {
		return s.appendFresh(ctx, tx, topic, reqs, outs)
	}
	head, err := lockHead(ctx, tx, topic)
	if err != nil {
		return 0, err
	}
	stored, err := s.lookupIDs(ctx, tx, topic, ids)
	if err != nil {
		return 0, err
	}
	fresh := s.assignSeqs(reqs, head, stored, outs)
	if len(fresh) == 0 {
		return 0, nil
	}
	args, size, err := encodeRecords(fresh)
	if err != nil {
		return 0, err
	}
	if err := s.insertRows(ctx, tx, args); err != nil {
		return 0, err
	}
	return s.advanceHead(ctx, tx, topic, head, len(fresh), size)
}

// appendFresh writes the records of reqs, all of topic, whose ids the
// caller expects the topic not to hold: the counter row is locked and
// advanced by one statement (reserve) before the records are inserted, so
// that the transaction has one statement besides the INSERTs. An insert
// that fails returns errLookUp.
func (s *Store) appendFresh(ctx context.Context, tx *sql.Tx, topic string, reqs []*appendReq, outs map[*appendReq][]event.Record) (uint64, error) {
	fresh := s.assignSeqs(reqs, 0, nil, outs) // seqs 1..n, moved past the head below
	args, size, err := encodeRecords(fresh)
	if err != nil {
		return 0, err
	}
	head, err := s.reserve(ctx, tx, topic, len(fresh), size)
	if err != nil {
		return 0, err
	}
	for i, r := range fresh {
		r.Seq += uint64(head)
		args[i*nRecordCols+seqArgIndex] = int64(r.Seq)
	}
	if err := s.insertRows(ctx, tx, args); err != nil {
		return 0, fmt.Errorf("%w: %w", errLookUp, err)
	}
	return uint64(head) + uint64(len(fresh)), nil
}

// appendOneStatement writes the records of reqs, all of topic, as
// appendFresh does, in one statement run on its own (its own transaction,
// with no BEGIN and COMMIT to send): the counter row's upsert in a WITH
// clause, whose head before the records the INSERT adds to each record's
// seq (1..n here). It does so only where the dialect gives RecordTypes,
// the ids are distinct and the records fit one INSERT; otherwise it
// reports done false and writes nothing. An error of the statement, which
// stored nothing, returns errLookUp, as appendFresh's insert does.
func (s *Store) appendOneStatement(ctx context.Context, topic string, reqs []*appendReq, heads map[string]uint64, outs map[*appendReq][]event.Record) (done bool, err error) {
	if s.d.RecordTypes == nil {
		return false, nil
	}
	n := 0
	for _, r := range reqs {
		n += len(r.recs)
	}
	if n > s.insertRowsPer() && s.d.Columns == nil {
		return false, nil
	}
	ids := make(map[string]struct{}, n)
	for _, r := range reqs {
		for i := range r.recs {
			ids[r.recs[i].ID] = struct{}{}
		}
	}
	if len(ids) != n {
		return false, nil // the topic's ids are looked up in a transaction
	}
	fresh := s.assignSeqs(reqs, 0, nil, outs) // seqs 1..n, moved past the head below
	args, size, err := encodeRecords(fresh)
	if err != nil {
		return true, err
	}
	var head int64
	dest := []any{&head}
	if s.d.Notify != "" {
		dest = append(dest, new(any))
	}
	if s.d.Columns != nil {
		if args, err = s.d.Columns(args); err != nil {
			return true, err
		}
	}
	args = append([]any{topic, int64(n), size}, args...)
	if err := s.w.QueryRowContext(ctx, s.oneStatementSQL(n), args...).Scan(dest...); err != nil {
		return true, fmt.Errorf("%w: %w", errLookUp, err)
	}
	for _, r := range fresh {
		r.Seq += uint64(head)
	}
	heads[topic] = uint64(head) + uint64(n)
	return true, nil
}

// oneStatementSQL returns the statement of appendOneStatement for rows
// records, built once per size (only the writer goroutine calls it). Its
// parameters are the topic, the number of records and their bytes (as
// reserve's), then each record's nRecordCols, or with the dialect's
// Columns one array per column (one statement for every size).
func (s *Store) oneStatementSQL(rows int) string {
	if s.d.Columns != nil {
		rows = 0
	}
	if q, ok := s.oneStmt[rows]; ok {
		return q
	}
	var b strings.Builder
	b.WriteString(`WITH h AS (INSERT INTO promlib_topics (topic, head, floor, events, bytes) VALUES ($1, $2, 1, $2, $3)
		ON CONFLICT (topic) DO UPDATE SET head = promlib_topics.head + $2, events = promlib_topics.events + $2, bytes = promlib_topics.bytes + $3
		RETURNING head - $2 AS base`)
	if s.d.Notify != "" {
		b.WriteString(", " + s.d.Notify + " AS notified")
	}
	b.WriteString(`), ins AS (INSERT INTO promlib_events (topic, ` + recordCols + `) SELECT v.c0, h.base + v.c1`)
	for j := 2; j < nRecordCols; j++ {
		b.WriteString(", v.c" + strconv.Itoa(j))
	}
	if s.d.Columns != nil {
		b.WriteString(` FROM h, `)
		s.unnest(&b, 3)
		b.WriteString(` AS v (c0`)
	} else {
		b.WriteString(` FROM h, (VALUES `)
		for i := range rows {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j := range nRecordCols {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("$" + strconv.Itoa(3+i*nRecordCols+j+1) + "::" + s.d.RecordTypes[j])
			}
			b.WriteByte(')')
		}
		b.WriteString(`) AS v (c0`)
	}
	for j := 1; j < nRecordCols; j++ {
		b.WriteString(", c" + strconv.Itoa(j))
	}
	b.WriteString(`)) SELECT base`)
	if s.d.Notify != "" {
		b.WriteString(", notified")
	}
	b.WriteString(` FROM h`)
	q := b.String()
	if s.oneStmt == nil {
		s.oneStmt = make(map[int]string)
	}
	s.oneStmt[rows] = q
	return q
}

// unnest writes unnest($k+1::type[], ...), the rows of the dialect's
// column arrays (Columns), one parameter per column after the first k.
func (s *Store) unnest(b *strings.Builder, k int) {
	b.WriteString(`unnest(`)
	for j := range nRecordCols {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(k+j+1) + "::" + s.d.RecordTypes[j] + "[]")
	}
	b.WriteByte(')')
}

// assignSeqs gives the records of reqs their outcome in outs: the stored
// record for an id in stored (nil: none), else the record at the next seq
// after head. It returns the copies to insert, in seq order.
func (s *Store) assignSeqs(reqs []*appendReq, head int64, stored map[string]event.Record, outs map[*appendReq][]event.Record) []*event.Record {
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
			out[i] = *in // the store's copy (see Append)
			out[i].Seq = uint64(head)
			if stored != nil {
				stored[in.ID] = out[i]
			}
			fresh = append(fresh, &out[i])
		}
		outs[r] = out
	}
	return fresh
}

// encodeRecords returns the insert arguments of recs, nRecordCols per
// record, and their bytes (see RowBytes).
func encodeRecords(recs []*event.Record) ([]any, int64, error) {
	var size int64
	args := make([]any, 0, len(recs)*nRecordCols)
	for _, r := range recs {
		var err error
		if args, err = recordArgs(args, r, int64(r.Seq), &size); err != nil {
			return nil, 0, err
		}
	}
	return args, size, nil
}

// insertRows writes the rows of args (nRecordCols per row) in multi-row
// INSERTs of up to the dialect's InsertRows rows, or in one INSERT of the
// columns' arrays (Dialect.Columns).
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, args []any) error {
	if s.d.Columns != nil {
		cols, err := s.d.Columns(args)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.insertSQL(0), cols...)
		return err
	}
	per := s.insertRowsPer()
	for len(args) > 0 {
		chunk := args[:min(len(args), per*nRecordCols)]
		args = args[len(chunk):]
		if _, err := tx.ExecContext(ctx, s.insertSQL(len(chunk)/nRecordCols), chunk...); err != nil {
			return err
		}
	}
	return nil
}

// insertRowsPer returns the rows of one INSERT: the dialect's InsertRows,
// at most maxRows.
func (s *Store) insertRowsPer() int {
	if per := s.d.InsertRows; per > 0 && per <= maxRows {
		return per
	}
	return maxRows
}

// insertSQL returns the INSERT of rows records, built once per size (only
// the writer goroutine calls it); with the dialect's Columns, the one
// INSERT of any number of records from the columns' arrays (rows 0).
func (s *Store) insertSQL(rows int) string {
	if q, ok := s.inserts[rows]; ok {
		return q
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO promlib_events (topic, ` + recordCols + `) `)
	if s.d.Columns != nil {
		b.WriteString(`SELECT * FROM `)
		s.unnest(&b, 0)
	} else {
		b.WriteString(`VALUES `)
		placeholders(&b, rows, nRecordCols, 0, s.d.AnonymousParams)
	}
	q := b.String()
	if s.inserts == nil {
		s.inserts = make(map[int]string)
	}
	s.inserts[rows] = q
	return q
}

// advanceHead writes the topic's new head after added records of size
// bytes; the dialect's Notify runs in the same statement.
func (s *Store) advanceHead(ctx context.Context, tx *sql.Tx, topic string, head int64, added int, size int64) (uint64, error) {
	head += int64(added)
	q := `UPDATE promlib_topics SET head = $2, events = events + $3, bytes = bytes + $4 WHERE topic = $1`
	var err error
	if s.d.Notify != "" {
		err = tx.QueryRowContext(ctx, q+` RETURNING `+s.d.Notify, topic, head, added, size).Scan(new(any))
	} else {
		_, err = tx.ExecContext(ctx, q, topic, head, added, size)
	}
	if err != nil {
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
		var q strings.Builder
		q.WriteString(`SELECT ` + recordCols + ` FROM promlib_events WHERE topic = `)
		param(&q, 1, s.d.AnonymousParams)
		q.WriteString(` AND id IN (` + inList(len(chunk), 1, s.d.AnonymousParams) + `)`)
		rows, err := tx.QueryContext(ctx, q.String(), args...)
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
