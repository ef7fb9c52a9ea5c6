package sqltable

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/projector/internal/changelog"
)

// row is what a record makes of its key's row.
type row struct {
	key     string
	seq     int64
	ts      int64
	deleted bool
	value   any    // JSON text, or nil (NULL)
	data    []byte // bytes, or nil (NULL)
	ct      string
}

// maxRows bounds the rows of one INSERT (7 parameters each).
const maxRows = 500

// rowsOf returns the row of each key's newest record of recs, sorted by
// key, so that two transactions writing the same keys lock their rows in
// the same order and cannot deadlock. Records without a key are left out,
// and so are those whose key the database cannot hold (logged).
func (t *Table) rowsOf(recs []event.Record) []row {
	keys, newest := changelog.Newest(recs)
	out := make([]row, 0, len(keys))
	for _, k := range keys {
		r := newest[k]
		if !t.cfg.Dialect.keyOK(k) {
			t.cfg.Logger.Warn("sqltable: key skipped: the database cannot hold it", "table", t.cfg.Table, "id", r.ID, "seq", r.Seq)
			continue
		}
		w := row{key: k, seq: int64(r.Seq), ts: r.TS, ct: r.ContentType}
		if w.ct == "" {
			w.ct = event.ContentTypeJSON
		}
		switch {
		case changelog.IsTombstone(r):
			w.deleted = true
		case r.IsBinary() || !t.cfg.Dialect.jsonOK(r.Payload):
			w.data = append([]byte{}, r.Payload...) // never nil: NULL is no payload
		default:
			w.value = string(r.Payload)
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(a.key, b.key) })
	return out
}

// write writes the newest record of each key of recs in one transaction.
func (t *Table) write(ctx context.Context, recs []event.Record) error {
	rows := t.rowsOf(recs)
	if len(rows) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.crash(0); err != nil {
		return err
	}
	err := t.inTx(ctx, func(tx *sql.Tx) error {
		half := len(rows) / 2
		if err := upsert(ctx, tx, t.rows, rows[:half]); err != nil {
			return err
		}
		if err := t.crash(1); err != nil {
			return err
		}
		return upsert(ctx, tx, t.rows, rows[half:])
	}, "write "+t.rows)
	if err != nil {
		return err
	}
	return t.crash(2)
}

// upsert writes rows into table: a row replaces the key's row only if its
// seq is higher, so that a redelivered or replayed record, put or
// tombstone, changes nothing.
func upsert(ctx context.Context, tx *sql.Tx, table string, rows []row) error {
	for len(rows) > 0 {
		n := min(len(rows), maxRows)
		var b strings.Builder
		b.WriteString(`INSERT INTO ` + quote(table) + ` AS t (key, seq, ts, deleted, value, data, content_type) VALUES `)
		args := make([]any, 0, 7*n)
		for i, r := range rows[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j := range 7 {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("$" + strconv.Itoa(7*i+j+1))
			}
			b.WriteByte(')')
			var data any
			if r.data != nil {
				data = r.data
			}
			args = append(args, r.key, r.seq, r.ts, r.deleted, r.value, data, r.ct)
		}
		b.WriteString(` ON CONFLICT (key) DO UPDATE SET seq = excluded.seq, ts = excluded.ts,
			deleted = excluded.deleted, value = excluded.value, data = excluded.data,
			content_type = excluded.content_type
			WHERE excluded.seq > t.seq`)
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("upsert: %w", err)
		}
		rows = rows[n:]
	}
	return nil
}
