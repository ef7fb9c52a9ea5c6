package sqlstore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/promethean/promlib/event"
)

// recordCols are the columns of a record, in the order scanRecords reads
// them and recordArgs writes them (after topic).
const recordCols = `seq, id, ts, rkey, part, headers, payload, content_type, caused_by, tags, sid`

const (
	nRecordCols = 12 // with topic
	seqArgIndex = 1  // of seq among a record's arguments (recordArgs)
)

// scanRecords reads the rows of recordCols and closes them. A row that
// does not decode (a column edited by hand) is an error that names it.
func (s *Store) scanRecords(rows *sql.Rows, topic string, capHint int) ([]event.Record, error) {
	defer rows.Close()
	out := make([]event.Record, 0, capHint)
	for rows.Next() {
		var (
			r                     event.Record
			seq                   int64
			headers, caused, tags sql.NullString
			payload               []byte
			part                  int64
		)
		if err := rows.Scan(&seq, &r.ID, &r.TS, &r.Key, &part, &headers, &payload, &r.ContentType, &caused, &tags, &r.SID); err != nil {
			return nil, err
		}
		r.Seq, r.Topic, r.Partition = uint64(seq), topic, int(part)
		if payload == nil {
			payload = []byte{}
		}
		r.Payload = payload
		if err := decodeJSON(headers, &r.Headers); err != nil {
			return nil, fmt.Errorf("record %d of %q: headers: %w", seq, topic, err)
		}
		if err := decodeJSON(caused, &r.CausedBy); err != nil {
			return nil, fmt.Errorf("record %d of %q: caused_by: %w", seq, topic, err)
		}
		if err := decodeJSON(tags, &r.Tags); err != nil {
			return nil, fmt.Errorf("record %d of %q: tags: %w", seq, topic, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func decodeJSON(v sql.NullString, into any) error {
	if !v.Valid || v.String == "" {
		return nil
	}
	return json.Unmarshal([]byte(v.String), into)
}

// encodeJSON returns v as JSON text, or nil (NULL) when empty.
func encodeJSON[T any](v T, empty bool) (any, error) {
	if empty {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// RowBytes is the SQL of what a row of promlib_events counts in its
// topic's bytes: its payload, key and headers (as their JSON text), in
// bytes; recordArgs counts the same for the rows it writes.
const RowBytes = `octet_length(payload) + octet_length(rkey) + COALESCE(octet_length(headers), 0)`

// recordArgs appends the insert arguments of r at seq, and adds to *size
// the row's bytes (see RowBytes).
func recordArgs(args []any, r *event.Record, seq int64, size *int64) ([]any, error) {
	headers, err := encodeJSON(r.Headers, len(r.Headers) == 0)
	if err != nil {
		return nil, err
	}
	caused, err := encodeJSON(r.CausedBy, len(r.CausedBy) == 0)
	if err != nil {
		return nil, err
	}
	tags, err := encodeJSON(r.Tags, len(r.Tags) == 0)
	if err != nil {
		return nil, err
	}
	payload := []byte(r.Payload)
	if payload == nil {
		payload = []byte{}
	}
	*size += int64(len(payload) + len(r.Key))
	if h, ok := headers.(string); ok {
		*size += int64(len(h))
	}
	return append(args, r.Topic, seq, r.ID, r.TS, r.Key, int64(r.Partition), headers, payload, r.ContentType, caused, tags, r.SID), nil
}

// placeholders returns "($k+1, ..., $k+cols), (...)" for rows rows, or
// "(?, ..., ?), (...)" when anon.
func placeholders(b *strings.Builder, rows, cols, k int, anon bool) {
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j := range cols {
			if j > 0 {
				b.WriteString(", ")
			}
			param(b, k+i*cols+j+1, anon)
		}
		b.WriteByte(')')
	}
}

// param writes the parameter of the n-th argument: "$n", or "?" when anon.
func param(b *strings.Builder, n int, anon bool) {
	if anon {
		b.WriteByte('?')
		return
	}
	b.WriteByte('$')
	b.WriteString(strconv.Itoa(n))
}

// inList returns "$k+1, ..., $k+n", or "?, ..., ?" when anon.
func inList(n, k int, anon bool) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		param(&b, k+i+1, anon)
	}
	return b.String()
}
