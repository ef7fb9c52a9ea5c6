package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/promethean/promlib/event"
)

var _ event.Importer = (*Store)(nil)

// ImportRecords implements [event.Importer] in one transaction that holds
// the topic's counter row (as an append does): the records' ids are looked
// up, the rows inserted at their seqs, and the head, counts and bytes
// raised; the dialect's Notify runs in the last statement. It bypasses
// the group commit, and so is ordered with appends by the counter row
// alone.
func (s *Store) ImportRecords(ctx context.Context, topic string, recs []event.Record) error {
	if err := event.ValidateTopic(topic); err != nil {
		return s.errorf("import: %w", err)
	}
	if len(recs) == 0 {
		return nil
	}
	ids := make([]string, 0, len(recs))
	seen := make(map[string]bool, len(recs))
	for i := range recs {
		r := &recs[i]
		if r.Topic != topic {
			return invalid("topic", "record %d has topic %q in an import to %q", i, r.Topic, topic)
		}
		if r.ID == "" {
			return invalid("id", "record %d has no id", i)
		}
		if i > 0 && r.Seq <= recs[i-1].Seq {
			return invalid("seq", "record %d has seq %d, not above the record before (%d)", i, r.Seq, recs[i-1].Seq)
		}
		if _, err := seqArg("seq", r.Seq); err != nil {
			return err
		}
		if err := checkPartition(r.Partition); err != nil {
			return err
		}
		if seen[r.ID] {
			return invalid("id", "record %d (seq %d): id %q twice in the import", i, r.Seq, r.ID)
		}
		seen[r.ID] = true
		ids = append(ids, r.ID)
	}
	ptrs := make([]*event.Record, len(recs))
	for i := range recs {
		ptrs[i] = &recs[i]
	}
	args, size, err := encodeRecords(ptrs)
	if err != nil {
		return s.errorf("import into %q: %w", topic, err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		head, err := lockHead(ctx, tx, topic)
		if err != nil {
			return err
		}
		if first := recs[0].Seq; first <= uint64(head) {
			return invalid("seq", "record 0 has seq %d, not above the head of %q (%d)", first, topic, head)
		}
		held, err := s.lookupIDs(ctx, tx, topic, ids)
		if err != nil {
			return err
		}
		for i := range recs {
			if old, ok := held[recs[i].ID]; ok {
				return invalid("id", "record %d (seq %d): topic %q holds id %q already, at seq %d", i, recs[i].Seq, topic, recs[i].ID, old.Seq)
			}
		}
		if err := s.importRows(ctx, tx, args); err != nil {
			return err
		}
		last := int64(recs[len(recs)-1].Seq)
		q := `UPDATE promlib_topics SET head = $2, events = events + $3, bytes = bytes + $4 WHERE topic = $1`
		if s.d.Notify != "" {
			return tx.QueryRowContext(ctx, q+` RETURNING `+s.d.Notify, topic, last, len(recs), size).Scan(new(any))
		}
		_, err = tx.ExecContext(ctx, q, topic, last, len(recs), size)
		return err
	})
	if err != nil {
		return s.errorf("import %d records into %q: %w", len(recs), topic, err)
	}
	s.announce(topic, recs[len(recs)-1].Seq)
	return nil
}

// importRows inserts the rows of args (nRecordCols per row) as insertRows
// does, with statements of its own (insertSQL's are the writer
// goroutine's).
func (s *Store) importRows(ctx context.Context, tx *sql.Tx, args []any) error {
	per := s.d.InsertRows
	if per <= 0 || per > maxRows {
		per = maxRows
	}
	for len(args) > 0 {
		chunk := args[:min(len(args), per*nRecordCols)]
		args = args[len(chunk):]
		var b strings.Builder
		b.WriteString(`INSERT INTO promlib_events (topic, ` + recordCols + `) VALUES `)
		placeholders(&b, len(chunk)/nRecordCols, nRecordCols, 0, s.d.AnonymousParams)
		if _, err := tx.ExecContext(ctx, b.String(), chunk...); err != nil {
			return err
		}
	}
	return nil
}

// ImportHead implements [event.Importer] with one upsert of the topic's
// counter row that raises head and floor.
func (s *Store) ImportHead(ctx context.Context, topic string, head, floor uint64) error {
	if err := event.ValidateTopic(topic); err != nil {
		return s.errorf("import: %w", err)
	}
	h, err := seqArg("head", head)
	if err != nil {
		return err
	}
	f, err := seqArg("floor", floor)
	if err != nil {
		return err
	}
	f = max(f, 1)
	_, err = s.exec(ctx, `INSERT INTO promlib_topics (topic, head, floor) VALUES ($1, $2, $3)
		ON CONFLICT (topic) DO UPDATE SET
			head = CASE WHEN promlib_topics.head < excluded.head THEN excluded.head ELSE promlib_topics.head END,
			floor = CASE WHEN promlib_topics.floor < excluded.floor THEN excluded.floor ELSE promlib_topics.floor END`,
		topic, h, min(f, h+1))
	if err != nil {
		return s.errorf("import the head of %q: %w", topic, err)
	}
	return nil
}
