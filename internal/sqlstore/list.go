package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/promethean/promlib/event"
)

// Summaries for [event.Lister]: promlib_topics counts a topic's records
// and their bytes (events and bytes, raised by the append transaction,
// lowered by Prune's; bytes are those of each row's payload, key and
// headers as stored, see RowBytes), and
// promlib_groups holds a row per group, inserted by its first cursor write
// in a process and deleted by DeleteGroup. Listing reads them, and per
// topic the first record at or above the floor and the record at the head
// by primary key; never a range of records.

// knowGroup inserts the row of (topic, group), once per Store.
func (s *Store) knowGroup(ctx context.Context, topic, group string) error {
	k := [2]string{topic, group}
	s.groupsMu.Lock()
	known := s.groupsKnown[k]
	s.groupsMu.Unlock()
	if known {
		return nil
	}
	if _, err := s.exec(ctx, `INSERT INTO promlib_groups (topic, grp) VALUES ($1, $2) ON CONFLICT (topic, grp) DO NOTHING`, topic, group); err != nil {
		return s.errorf("record group %q of %q: %w", group, topic, err)
	}
	s.groupsMu.Lock()
	s.groupsKnown[k] = true
	s.groupsMu.Unlock()
	return nil
}

// ListTopics implements [event.Lister].
func (s *Store) ListTopics(ctx context.Context) ([]event.TopicInfo, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT topic, head, floor, events, bytes FROM promlib_topics ORDER BY topic`)
	if err != nil {
		return nil, s.errorf("list topics: %w", err)
	}
	var out []event.TopicInfo
	var floors []int64
	for rows.Next() {
		var ti event.TopicInfo
		var head, floor int64
		if err := rows.Scan(&ti.Topic, &head, &floor, &ti.Events, &ti.Bytes); err != nil {
			rows.Close()
			return nil, s.errorf("list topics: %w", err)
		}
		if head <= 0 {
			continue
		}
		ti.LastSeq, ti.Bytes = uint64(head), max(ti.Bytes, 0)
		out = append(out, ti)
		floors = append(floors, floor)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list topics: %w", err)
	}
	for i := range out {
		ti := &out[i]
		err := s.r.QueryRowContext(ctx, `SELECT ts FROM promlib_events WHERE topic = $1 AND seq = $2`, ti.Topic, int64(ti.LastSeq)).Scan(&ti.LastTS)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, s.errorf("list topics: %w", err)
		}
		if ti.Events <= 0 {
			ti.Events = 0
			continue
		}
		var seq int64
		err = s.r.QueryRowContext(ctx, `SELECT seq, ts FROM promlib_events WHERE topic = $1 AND seq >= $2 ORDER BY seq LIMIT 1`,
			ti.Topic, floors[i]).Scan(&seq, &ti.FirstTS)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, s.errorf("list topics: %w", err)
		}
		ti.FirstSeq = uint64(seq)
	}
	if out == nil {
		out = []event.TopicInfo{}
	}
	return out, nil
}

// ListGroups implements [event.Lister].
func (s *Store) ListGroups(ctx context.Context, topic string) ([]event.GroupInfo, error) {
	head, err := s.Head(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []event.GroupInfo
	idx := make(map[string]int)
	parts := make(map[string]map[int]*event.PartitionInfo)
	err = s.each(ctx, `SELECT grp FROM promlib_groups WHERE topic = $1 ORDER BY grp`, []any{topic}, func(rows *sql.Rows) error {
		var g string
		if err := rows.Scan(&g); err != nil {
			return err
		}
		idx[g] = len(out)
		parts[g] = make(map[int]*event.PartitionInfo)
		out = append(out, event.GroupInfo{Topic: topic, Group: g, Head: head})
		return nil
	})
	if err != nil || len(out) == 0 {
		return []event.GroupInfo{}, err
	}
	part := func(g string, p int) *event.PartitionInfo {
		m := parts[g]
		if m == nil {
			return nil
		}
		if m[p] == nil {
			m[p] = &event.PartitionInfo{Partition: p}
		}
		return m[p]
	}
	err = s.each(ctx, `SELECT grp, part, seq FROM promlib_cursors WHERE topic = $1`, []any{topic}, func(rows *sql.Rows) error {
		var g string
		var p int
		var seq int64
		if err := rows.Scan(&g, &p, &seq); err != nil {
			return err
		}
		if pi := part(g, p); pi != nil {
			pi.Cursor = uint64(max(seq, 0))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	now := s.cfg.Clock.Now().UnixNano()
	err = s.each(ctx, `SELECT grp, part, member, expires FROM promlib_leases WHERE topic = $1`, []any{topic}, func(rows *sql.Rows) error {
		var g, m string
		var p int
		var exp int64
		if err := rows.Scan(&g, &p, &m, &exp); err != nil {
			return err
		}
		if pi := parts[g][p]; pi != nil && exp > now { // a released row has expires 0
			pi.Owner = m
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.each(ctx, `SELECT grp, member, expires, left_at FROM promlib_members WHERE topic = $1`, []any{topic}, func(rows *sql.Rows) error {
		var g, m string
		var exp, left int64
		if err := rows.Scan(&g, &m, &exp, &left); err != nil {
			return err
		}
		if i, ok := idx[g]; ok && left == 0 && exp > now {
			out[i].Members = append(out[i].Members, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.each(ctx, `SELECT grp, part, v FROM promlib_group_state WHERE topic = $1`, []any{topic}, func(rows *sql.Rows) error {
		var g string
		var p int
		var v int64
		if err := rows.Scan(&g, &p, &v); err != nil {
			return err
		}
		if pi := parts[g][p]; pi != nil && v != settled {
			pi.InFlight++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		for _, p := range parts[out[i].Group] {
			out[i].Partitions = append(out[i].Partitions, *p)
		}
		out[i].Summarise()
	}
	return out, nil
}

// each runs query and calls f for each row.
func (s *Store) each(ctx context.Context, query string, args []any, f func(*sql.Rows) error) error {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return s.errorf("list groups: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return s.errorf("list groups: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return s.errorf("list groups: %w", err)
	}
	return nil
}

// DeleteGroup implements [event.Lister], in one transaction. The lease
// rows go first: a fenced write locks the lease row of its partition
// before the cursor or the state rows (see [Store.fenced]), and deleting
// in the same order keeps the two from waiting on each other in a
// deadlock. Deleting the lease rows starts the partitions' tokens over.
func (s *Store) DeleteGroup(ctx context.Context, topic, group string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, table := range []string{"promlib_leases", "promlib_cursors", "promlib_members", "promlib_group_state", "promlib_groups"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE topic = $1 AND grp = $2`, topic, group); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.errorf("delete group %q of %q: %w", group, topic, err)
	}
	s.groupsMu.Lock()
	delete(s.groupsKnown, [2]string{topic, group})
	s.groupsMu.Unlock()
	return nil
}
