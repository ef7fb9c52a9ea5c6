package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/promethean/promlib/event"
)

// Summaries for [event.Lister]: promlib_topics counts a topic's records
// and their bytes (events and bytes, raised by the append transaction,
// lowered by Prune's; bytes are those of each row's payload, key and
// headers as stored, see RowBytes), and
// promlib_groups holds a row per group, inserted by its first cursor write
// in a process or by CreateGroup, and deleted by DeleteGroup and
// ExpireGroup. Listing reads them, and per
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
	s.knownGroup(topic, group)
	return nil
}

// knownGroup records that the row of (topic, group) exists.
func (s *Store) knownGroup(topic, group string) {
	s.groupsMu.Lock()
	s.groupsKnown[[2]string{topic, group}] = true
	s.groupsMu.Unlock()
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

// ListGroups implements [event.Lister]. A group's LastActive is the
// latest of its settings' creation (promlib_groups.at), its cursors' last
// changes (promlib_cursors.at) and its members' heartbeats: the end of a
// member's (expires), or the time it left (left_at) for a member that
// left; see [lastActive].
func (s *Store) ListGroups(ctx context.Context, topic string) ([]event.GroupInfo, error) {
	head, err := s.Head(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []event.GroupInfo
	idx := make(map[string]int)
	parts := make(map[string]map[int]*event.PartitionInfo)
	active := make(map[string]int64) // Unix ns, by group
	err = s.each(ctx, `SELECT grp, config, at FROM promlib_groups WHERE topic = $1 ORDER BY grp`, []any{topic}, func(rows *sql.Rows) error {
		var g, js string
		var at int64
		if err := rows.Scan(&g, &js, &at); err != nil {
			return err
		}
		gi := event.GroupInfo{Topic: topic, Group: g, Head: head}
		if js != "" {
			cfg, err := decodeGroupConfig(js)
			if err != nil {
				return fmt.Errorf("group %q: %w", g, err)
			}
			gi.Config = &cfg
		}
		idx[g] = len(out)
		parts[g] = make(map[int]*event.PartitionInfo)
		active[g] = at
		out = append(out, gi)
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
	err = s.each(ctx, `SELECT grp, part, seq, at FROM promlib_cursors WHERE topic = $1`, []any{topic}, func(rows *sql.Rows) error {
		var g string
		var p int
		var seq, at int64
		if err := rows.Scan(&g, &p, &seq, &at); err != nil {
			return err
		}
		if pi := part(g, p); pi != nil {
			pi.Cursor = uint64(max(seq, 0))
			active[g] = max(active[g], at)
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
		i, ok := idx[g]
		if !ok {
			return nil
		}
		if left == 0 && exp > now {
			out[i].Members = append(out[i].Members, m)
		}
		active[g] = max(active[g], memberActive(exp, left))
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
		out[i].LastActive = lastActive(active[out[i].Group])
		out[i].Summarise()
	}
	return out, nil
}

// memberActive is until when a member's row shows it active (Unix ns):
// the end of its heartbeat, or the time it left (its tombstone's expires
// is when the tombstone goes, not activity).
func memberActive(expires, leftAt int64) int64 {
	if leftAt != 0 {
		return leftAt
	}
	return expires
}

// lastActive converts the latest activity of a group (Unix ns, 0 for
// none) to [event.GroupInfo].LastActive (Unix ms).
func lastActive(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return time.Unix(0, ns).UnixMilli()
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

// DeleteGroup implements [event.Lister], in one transaction (see
// [Store.deleteGroup]).
func (s *Store) DeleteGroup(ctx context.Context, topic, group string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error { return deleteGroup(ctx, tx, topic, group) })
	if err != nil {
		return s.errorf("delete group %q of %q: %w", group, topic, err)
	}
	s.forgetGroup(topic, group)
	return nil
}

// groupTables are the tables with rows of a group, in the order
// deleteGroup deletes them and ExpireGroup locks them.
var groupTables = []string{"promlib_groups", "promlib_leases", "promlib_cursors", "promlib_members", "promlib_group_state"}

// deleteGroup deletes everything of group on topic in tx: its row in
// promlib_groups (with its settings), then its leases, cursors, members
// and group state. The group's row goes first, as ExpireGroup locks it
// first and a Heartbeat holds it before the member's row. The lease rows
// go before the cursor and the state rows: a fenced write locks the lease
// row of its partition before those (see [Store.fenced]), and deleting
// in the same order keeps the two from waiting on each other in a
// deadlock. Deleting the lease rows starts the partitions' tokens over.
func deleteGroup(ctx context.Context, tx *sql.Tx, topic, group string) error {
	for _, table := range groupTables {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE topic = $1 AND grp = $2`, topic, group); err != nil {
			return err
		}
	}
	return nil
}

// forgetGroup forgets that the row of (topic, group) exists, after the
// group was deleted: a cursor write of this store inserts it again.
// (Other stores sharing the database do not know of the delete: a cursor
// write of theirs makes a cursor without the row, a group not listed,
// until their CreateGroup makes the row.)
func (s *Store) forgetGroup(topic, group string) {
	s.groupsMu.Lock()
	delete(s.groupsKnown, [2]string{topic, group})
	s.groupsMu.Unlock()
}

// ExpireGroup implements [event.Lister] in one write transaction: it
// reads the group's activity (as ListGroups computes LastActive) and its
// live members, and deletes the group as DeleteGroup does if it has a row
// in promlib_groups, no live member (a member row not left whose expires
// is after now) and a LastActive before before.
//
// SQLite runs the transaction alone: it takes the write lock at BEGIN, so
// no other write, in this process or another, comes between the check
// and the delete.
//
// In PostgreSQL the transaction locks the group's rows before it reads
// them, with the dialect's RowLock (FOR UPDATE), in deleteGroup's order:
// the promlib_groups row, then the lease, cursor and member rows. It
// reads the clock after the locks, so a wait for one leaves it no stale
// time. Against the writes of the group's members:
//   - a Heartbeat holds the group's promlib_groups row for its statement
//     (FOR KEY SHARE): a heartbeat that holds it first has committed when
//     the expiry gets the row, and the check reads its member (live: the
//     group is kept); a later one waits for the expiry to end and writes
//     its member's row after it (of a group that is gone, when it was
//     expired: as a heartbeat that came after the delete).
//   - a fenced cursor commit or group-state write holds its partition's
//     lease row from its check to its commit (FOR SHARE): one that came
//     first has committed, and the check reads its cursor's at; one that
//     comes after finds the lease deleted and is refused.
//   - a commit that changes a stored cursor without a fence, an
//     AcquireLease, TakeLease or ReleaseLease of a stored lease, a Leave,
//     CreateGroup or UpdateGroup wait for the row they write and then
//     come after the check, or after the delete (CreateGroup creating the
//     group afresh, UpdateGroup finding no settings, a lease or cursor
//     written anew).
//
// What remains are the rows the locks cannot hold because they are not
// there yet, written by a writer that is no live member (a live member
// keeps the group): the first cursor of a partition written without a
// fence (a group's first cursors, an operator's SetCursor), or the first
// lease of a partition, committed after the check reads the cursors and
// before the delete, is deleted with the group although it is activity
// after the check; committed after the delete, it is left as a row of a
// group that is gone (a cursor outside ListGroups until the group's row is
// made again, a lease whose token starts over). And a heartbeat whose
// statement began before the group's row was first inserted does not see
// the row to hold it; the group would have to be expired with a cut-off
// after its creation for that heartbeat to count.
func (s *Store) ExpireGroup(ctx context.Context, topic, group string, before int64) (bool, error) {
	done := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		done = false
		var active int64
		err := tx.QueryRowContext(ctx, `SELECT at FROM promlib_groups WHERE topic = $1 AND grp = $2`+s.d.RowLock, topic, group).Scan(&active)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // not a known group
		}
		if err != nil {
			return err
		}
		if s.d.RowLock != "" {
			if _, err := tx.ExecContext(ctx, `SELECT 1 FROM promlib_leases WHERE topic = $1 AND grp = $2`+s.d.RowLock, topic, group); err != nil {
				return err
			}
		}
		var cur int64
		err = tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(at), 0) FROM (
			SELECT at FROM promlib_cursors WHERE topic = $1 AND grp = $2`+s.d.RowLock+`) AS c`, topic, group).Scan(&cur)
		if err != nil {
			return err
		}
		active = max(active, cur)
		type member struct{ expires, left int64 }
		var ms []member
		rows, err := tx.QueryContext(ctx, `SELECT expires, left_at FROM promlib_members WHERE topic = $1 AND grp = $2`+s.d.RowLock, topic, group)
		if err != nil {
			return err
		}
		for rows.Next() {
			var m member
			if err := rows.Scan(&m.expires, &m.left); err != nil {
				rows.Close()
				return err
			}
			ms = append(ms, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		now := s.cfg.Clock.Now().UnixNano()
		for _, m := range ms {
			if m.left == 0 && m.expires > now {
				return nil // a live member
			}
			active = max(active, memberActive(m.expires, m.left))
		}
		if lastActive(active) >= before {
			return nil
		}
		if err := deleteGroup(ctx, tx, topic, group); err != nil {
			return err
		}
		done = true
		return nil
	})
	if err != nil {
		return false, s.errorf("expire group %q of %q: %w", group, topic, err)
	}
	if done {
		s.forgetGroup(topic, group)
	}
	return done, nil
}
