package sqlstore

import (
	"context"
	"database/sql"

	"github.com/promethean/promlib/event"
)

// LatestByKey implements [event.KeyStore]: the record of the highest seq
// of each key, found through the (topic, rkey, seq) index.
func (s *Store) LatestByKey(ctx context.Context, topic string, keys []string) (map[string]event.Record, error) {
	out := make(map[string]event.Record, len(keys))
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), maxRows)]
		keys = keys[len(chunk):]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, topic)
		for _, k := range chunk {
			args = append(args, k)
		}
		rows, err := s.r.QueryContext(ctx, `SELECT `+recordCols+` FROM promlib_events e WHERE topic = $1 AND seq IN (
			SELECT MAX(seq) FROM promlib_events WHERE topic = $1 AND rkey IN (`+inList(len(chunk), 1, false)+`) GROUP BY rkey)`, args...)
		if err != nil {
			return nil, s.errorf("latest by key of %q: %w", topic, err)
		}
		recs, err := s.scanRecords(rows, topic, len(chunk))
		if err != nil {
			return nil, s.errorf("latest by key of %q: %w", topic, err)
		}
		for _, r := range recs {
			if r.Key != "" {
				out[r.Key] = r
			}
		}
	}
	return out, nil
}

// Latest implements [event.KeyStore].
func (s *Store) Latest(ctx context.Context, topic, afterKey string, limit int) ([]event.Record, error) {
	if limit <= 0 {
		return nil, invalid("limit", "%d, want at least 1", limit)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+recordCols+` FROM promlib_events WHERE topic = $1 AND seq IN (
		SELECT MAX(seq) FROM promlib_events WHERE topic = $1 AND rkey > $2 GROUP BY rkey ORDER BY rkey LIMIT $3)
		ORDER BY rkey`, topic, afterKey, limit)
	if err != nil {
		return nil, s.errorf("latest of %q after %q: %w", topic, afterKey, err)
	}
	out, err := s.scanRecords(rows, topic, limit)
	if err != nil {
		return nil, s.errorf("latest of %q after %q: %w", topic, afterKey, err)
	}
	return out, nil
}

// Floor implements [event.Pruner].
func (s *Store) Floor(ctx context.Context, topic string) (uint64, error) {
	var f int64
	err := s.r.QueryRowContext(ctx, `SELECT floor FROM promlib_topics WHERE topic = $1`, topic).Scan(&f)
	if err == sql.ErrNoRows {
		return 1, nil
	}
	if err != nil {
		return 0, s.errorf("floor of %q: %w", topic, err)
	}
	return uint64(f), nil
}

// Prune implements [event.Pruner], in one transaction that holds the
// topic's counter row: the floor it sets is the lowest seq left, or the
// head+1 when none is.
func (s *Store) Prune(ctx context.Context, topic string, before int64, keepLatest bool) (int, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		head, err := lockHead(ctx, tx, topic)
		if err != nil {
			return err
		}
		where := `topic = $1 AND ts < $2`
		if keepLatest {
			where += ` AND rkey <> ''
				AND seq < (SELECT MAX(seq) FROM promlib_events l WHERE l.topic = $1 AND l.rkey = promlib_events.rkey)`
		}
		// The counter row is locked: nothing changes the rows between the
		// sum and the delete.
		var size int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(`+RowBytes+`), 0) FROM promlib_events WHERE `+where, topic, before).Scan(&size); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM promlib_events WHERE `+where, topic, before)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE promlib_topics SET events = events - $2, bytes = bytes - $3 WHERE topic = $1`, topic, n, size); err != nil {
			return err
		}
		if keepLatest {
			return nil
		}
		var low sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MIN(seq) FROM promlib_events WHERE topic = $1`, topic).Scan(&low); err != nil {
			return err
		}
		floor := head + 1
		if low.Valid {
			floor = low.Int64
		}
		_, err = tx.ExecContext(ctx, `UPDATE promlib_topics SET floor = $2 WHERE topic = $1 AND floor < $2`, topic, floor)
		return err
	})
	if err != nil {
		return 0, s.errorf("prune %q before %d: %w", topic, before, err)
	}
	return int(n), nil
}
