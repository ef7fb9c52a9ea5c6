package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/promethean/promlib/event"
)

// Cursors implements [event.CursorStore].
func (s *Store) Cursors(ctx context.Context, topic, group string) (map[int]uint64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT part, seq FROM promlib_cursors WHERE topic = $1 AND grp = $2`, topic, group)
	if err != nil {
		return nil, s.errorf("cursors of %q/%q: %w", topic, group, err)
	}
	defer rows.Close()
	out := make(map[int]uint64)
	for rows.Next() {
		var p, seq int64
		if err := rows.Scan(&p, &seq); err != nil {
			return nil, s.errorf("cursors of %q/%q: %w", topic, group, err)
		}
		out[int(p)] = uint64(seq)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("cursors of %q/%q: %w", topic, group, err)
	}
	return out, nil
}

// CommitCursor implements [event.CursorStore].
func (s *Store) CommitCursor(ctx context.Context, p event.PartitionRef, seq uint64) error {
	return s.writeCursor(ctx, p, seq, ` WHERE promlib_cursors.seq < excluded.seq`)
}

// SetCursor implements [event.CursorStore].
func (s *Store) SetCursor(ctx context.Context, p event.PartitionRef, seq uint64) error {
	return s.writeCursor(ctx, p, seq, ``)
}

func (s *Store) writeCursor(ctx context.Context, p event.PartitionRef, seq uint64, cond string) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	v, err := seqArg("seq", seq)
	if err != nil {
		return err
	}
	if err := s.knowGroup(ctx, p.Topic, p.Group); err != nil {
		return err
	}
	_, err = s.exec(ctx, `INSERT INTO promlib_cursors (topic, grp, part, seq) VALUES ($1, $2, $3, $4)
		ON CONFLICT (topic, grp, part) DO UPDATE SET seq = excluded.seq`+cond, p.Topic, p.Group, p.Partition, v)
	if err != nil {
		return s.errorf("cursor of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}

// leftKeep is how long the tombstone of a member that left is kept: far
// longer than a heartbeat of its can be in flight.
const leftKeep = 10 * time.Minute

// errLeft is returned by the heartbeat of a member that has left after the
// heartbeat began.
var errLeft = errors.New("the member has left the group")

// Heartbeat implements [event.LeaseStore]. A member that left keeps a
// tombstone (left_at) that fences off a heartbeat begun before it left.
func (s *Store) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	now := s.cfg.Clock.Now().UnixNano()
	n, err := s.exec(ctx, `INSERT INTO promlib_members (topic, grp, member, expires, left_at) VALUES ($1, $2, $3, $4, 0)
		ON CONFLICT (topic, grp, member) DO UPDATE SET expires = excluded.expires, left_at = 0
		WHERE promlib_members.left_at = 0 OR promlib_members.left_at < $5`,
		topic, group, member, now+int64(ttl), now)
	if err == nil && n == 0 {
		err = errLeft
	}
	if err != nil {
		return nil, s.errorf("heartbeat of %q in %q/%q: %w", member, topic, group, err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT member, expires, left_at FROM promlib_members WHERE topic = $1 AND grp = $2`, topic, group)
	if err != nil {
		return nil, s.errorf("members of %q/%q: %w", topic, group, err)
	}
	defer rows.Close()
	live := []string{}
	expired := false
	for rows.Next() {
		var m string
		var exp, left int64
		if err := rows.Scan(&m, &exp, &left); err != nil {
			return nil, s.errorf("members of %q/%q: %w", topic, group, err)
		}
		switch {
		case left != 0:
			expired = expired || exp <= now
		case exp > now || m == member:
			live = append(live, m)
		default:
			expired = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("members of %q/%q: %w", topic, group, err)
	}
	rows.Close()
	if expired {
		if _, err := s.exec(ctx, `DELETE FROM promlib_members WHERE topic = $1 AND grp = $2 AND expires <= $3`, topic, group, now); err != nil {
			s.cfg.Logger.Warn(s.d.Name+": delete expired members failed", "topic", topic, "group", group, "err", err)
		}
	}
	slices.Sort(live)
	return live, nil
}

// Leave implements [event.LeaseStore]: the member's row becomes its
// tombstone.
func (s *Store) Leave(ctx context.Context, topic, group, member string) error {
	now := s.cfg.Clock.Now()
	_, err := s.exec(ctx, `INSERT INTO promlib_members (topic, grp, member, expires, left_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (topic, grp, member) DO UPDATE SET expires = excluded.expires, left_at = excluded.left_at`,
		topic, group, member, now.Add(leftKeep).UnixNano(), now.UnixNano())
	if err != nil {
		return s.errorf("leave %q/%q as %q: %w", topic, group, member, err)
	}
	return nil
}

// AcquireLease implements [event.LeaseStore] with one conditional upsert:
// the row is taken when there is none, when it is the member's own, or
// when it has expired.
func (s *Store) AcquireLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (bool, error) {
	if err := checkPartition(p.Partition); err != nil {
		return false, err
	}
	now := s.cfg.Clock.Now().UnixNano()
	n, err := s.exec(ctx, `INSERT INTO promlib_leases (topic, grp, part, member, expires) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (topic, grp, part) DO UPDATE SET member = excluded.member, expires = excluded.expires
		WHERE promlib_leases.member = excluded.member OR promlib_leases.expires <= $6`,
		p.Topic, p.Group, p.Partition, member, now+int64(ttl), now)
	if err != nil {
		return false, s.errorf("lease %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return n == 1, nil
}

// ReleaseLease implements [event.LeaseStore].
func (s *Store) ReleaseLease(ctx context.Context, p event.PartitionRef, member string) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	_, err := s.exec(ctx, `DELETE FROM promlib_leases WHERE topic = $1 AND grp = $2 AND part = $3 AND member = $4`,
		p.Topic, p.Group, p.Partition, member)
	if err != nil {
		return s.errorf("release %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}

// settled marks a settled seq in promlib_group_state; other values of v
// are attempt counts.
const settled = -1

// GroupState implements [event.GroupStateStore].
func (s *Store) GroupState(ctx context.Context, p event.PartitionRef) (event.GroupState, error) {
	var st event.GroupState
	if err := checkPartition(p.Partition); err != nil {
		return st, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, v FROM promlib_group_state WHERE topic = $1 AND grp = $2 AND part = $3 ORDER BY seq`,
		p.Topic, p.Group, p.Partition)
	if err != nil {
		return st, s.errorf("group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq, v int64
		if err := rows.Scan(&seq, &v); err != nil {
			return st, s.errorf("group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
		}
		if v == settled {
			st.Settled = append(st.Settled, uint64(seq))
			continue
		}
		if st.Attempts == nil {
			st.Attempts = make(map[uint64]int)
		}
		st.Attempts[uint64(seq)] = int(v)
	}
	if err := rows.Err(); err != nil {
		return st, s.errorf("group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return st, nil
}

// UpdateGroupState implements [event.GroupStateStore], in one transaction.
func (s *Store) UpdateGroupState(ctx context.Context, p event.PartitionRef, u event.GroupStateUpdate) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	for seq, n := range u.Attempts {
		if n < 1 || n > 1<<30 {
			return invalid("Attempts", "seq %d: %d, want 1 to 2^30", seq, n)
		}
		if _, err := seqArg("Attempts", seq); err != nil {
			return err
		}
	}
	for _, seq := range append(slices.Clone(u.Settled), u.Forget...) {
		if _, err := seqArg("seq", seq); err != nil {
			return err
		}
	}
	if u.IsZero() {
		return nil
	}
	key := []any{p.Topic, p.Group, p.Partition}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, seq := range slices.Sorted(maps.Keys(u.Attempts)) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO promlib_group_state (topic, grp, part, seq, v) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (topic, grp, part, seq) DO UPDATE SET v = excluded.v
				WHERE promlib_group_state.v <> -1 AND promlib_group_state.v < excluded.v`,
				append(key, int64(seq), u.Attempts[seq])...); err != nil {
				return err
			}
		}
		for _, seq := range u.Settled {
			if _, err := tx.ExecContext(ctx, `INSERT INTO promlib_group_state (topic, grp, part, seq, v) VALUES ($1, $2, $3, $4, -1)
				ON CONFLICT (topic, grp, part, seq) DO UPDATE SET v = -1`, append(key, int64(seq))...); err != nil {
				return err
			}
		}
		for _, seq := range u.Forget {
			if _, err := tx.ExecContext(ctx, `DELETE FROM promlib_group_state WHERE topic = $1 AND grp = $2 AND part = $3 AND seq = $4`,
				append(key, int64(seq))...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.errorf("update group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}

// ResetGroupState implements [event.GroupStateStore].
func (s *Store) ResetGroupState(ctx context.Context, p event.PartitionRef) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	_, err := s.exec(ctx, `DELETE FROM promlib_group_state WHERE topic = $1 AND grp = $2 AND part = $3`, p.Topic, p.Group, p.Partition)
	if err != nil {
		return s.errorf("reset group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}
