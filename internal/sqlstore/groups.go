package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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

// CommitCursor implements [event.CursorStore]. A fenced commit checks the
// lease and raises the cursor in one transaction (see [Store.fenced]). A
// commit that raises the cursor records the time in the row's at (the
// group's activity, see [Store.ListGroups]), in the same statement.
func (s *Store) CommitCursor(ctx context.Context, p event.PartitionRef, seq uint64, f event.Fence) error {
	return s.writeCursor(ctx, p, seq, f, ` WHERE promlib_cursors.seq < excluded.seq`)
}

// SetCursor implements [event.CursorStore]; it records the time in the
// row's at, as a commit that raises the cursor does.
func (s *Store) SetCursor(ctx context.Context, p event.PartitionRef, seq uint64) error {
	return s.writeCursor(ctx, p, seq, event.Fence{}, ``)
}

// writeCursor upserts the cursor of p and the time of the write (at),
// under f unless f is zero; cond guards the update of a stored cursor,
// so at changes only with the cursor.
func (s *Store) writeCursor(ctx context.Context, p event.PartitionRef, seq uint64, f event.Fence, cond string) error {
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
	q := `INSERT INTO promlib_cursors (topic, grp, part, seq, at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (topic, grp, part) DO UPDATE SET seq = excluded.seq, at = excluded.at` + cond
	if f.IsZero() {
		_, err = s.exec(ctx, q, p.Topic, p.Group, p.Partition, v, s.cfg.Clock.Now().UnixNano())
	} else {
		err = s.fenced(ctx, p, f, func(tx *sql.Tx, now int64) error {
			_, err := tx.ExecContext(ctx, q, p.Topic, p.Group, p.Partition, v, now)
			return err
		})
	}
	if errors.Is(err, event.ErrLeaseLost) {
		return err
	}
	if err != nil {
		return s.errorf("cursor of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}

// fenced runs write in a write transaction that first checks that the
// lease of f on p is live: the lease row names f's member and token and
// has not expired by the store's clock (now, which write is given). If
// it is not, nothing is written and the error is [event.FenceError].
//
// The check and the write are one step. The transaction reads the lease
// row with the dialect's FenceLock (PostgreSQL: FOR SHARE), which holds
// the row until the transaction ends: an AcquireLease of another member
// or a TakeLease, an upsert of that row, waits for the write to commit,
// or, if it updated the row first, the check waits for it and then reads
// its grant (READ COMMITTED re-reads a row locked after a concurrent
// update). SQLite needs no lock: the store's write transactions take the
// database's write lock at BEGIN, so no other writer, in this process or
// another, runs between the check and the write. The clock is read after
// BEGIN, so a wait for the write lock does not leave the check with a
// time that has passed.
//
// Tokens start at 1: a fence with token 0 never matches, not even a lease
// row of a database made before tokens, whose rows have token 0.
func (s *Store) fenced(ctx context.Context, p event.PartitionRef, f event.Fence, write func(tx *sql.Tx, now int64) error) error {
	if f.Token == 0 || f.Token > math.MaxInt64 {
		return event.FenceError(p, f)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.cfg.Clock.Now().UnixNano()
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM promlib_leases
			WHERE topic = $1 AND grp = $2 AND part = $3 AND member = $4 AND token = $5 AND expires > $6`+s.d.FenceLock,
			p.Topic, p.Group, p.Partition, f.Member, int64(f.Token), now).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return event.FenceError(p, f)
		}
		if err != nil {
			return err
		}
		return write(tx, now)
	})
}

// leftKeep is how long the tombstone of a member that left is kept: far
// longer than a heartbeat of its can be in flight.
const leftKeep = 10 * time.Minute

// errLeft is returned by the heartbeat of a member that has left after the
// heartbeat began.
var errLeft = errors.New("the member has left the group")

// Heartbeat implements [event.LeaseStore]. A member that left keeps a
// tombstone (left_at) that fences off a heartbeat begun before it left.
//
// The upsert of the member's row holds the group's promlib_groups row for
// its statement, with the dialect's GroupLock (PostgreSQL: FOR KEY SHARE,
// in a sub-SELECT that the upsert reads one count from, whether the group
// has a row or not): an ExpireGroup, which locks that row first, waits
// for the heartbeat and then sees it, or the heartbeat waits for the
// expiry and writes its row after the group is gone.
func (s *Store) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	now := s.cfg.Clock.Now().UnixNano()
	n, err := s.exec(ctx, s.heartbeatSQL(), topic, group, member, now+int64(ttl), now)
	if err == nil && n == 0 {
		err = errLeft
	}
	if err != nil {
		return nil, s.errorf("heartbeat of %q in %q/%q: %w", member, topic, group, err)
	}
	return s.liveMembers(ctx, topic, group, member, now)
}

// heartbeatSQL upserts the row of a member ($3) of group $2 on topic $1
// alive until $4, unless its tombstone is not older than $5 (now): it
// then changes no row.
func (s *Store) heartbeatSQL() string {
	return `INSERT INTO promlib_members (topic, grp, member, expires, left_at)
		SELECT $1, $2, $3, $4, 0 FROM (SELECT COUNT(*) AS n FROM (
			SELECT 1 AS one FROM promlib_groups WHERE topic = $1 AND grp = $2` + s.d.GroupLock + `) AS g) AS held WHERE true
		ON CONFLICT (topic, grp, member) DO UPDATE SET expires = excluded.expires, left_at = 0
		WHERE promlib_members.left_at = 0 OR promlib_members.left_at < $5`
}

// liveMembers returns the members of group on topic alive at now (Unix
// ns), sorted, with member, which has just renewed, among them; it
// deletes the rows of members expired by now, and of tombstones past
// their keep, when it sees any.
func (s *Store) liveMembers(ctx context.Context, topic, group, member string, now int64) ([]string, error) {
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
// when it has expired. The row of a partition stays once made (ReleaseLease
// marks it released), so its token counts on over every holding: the
// upsert keeps the token when the row names the same member (a renewal, or
// a lease that ran out with nobody taking it), and raises it otherwise (a
// first grant inserts 1). A row of a database made before tokens has token
// 0, which a grant always raises: a granted token is never 0.
func (s *Store) AcquireLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, bool, error) {
	if err := checkPartition(p.Partition); err != nil {
		return 0, false, err
	}
	now := s.cfg.Clock.Now().UnixNano()
	var tok int64
	err := s.w.QueryRowContext(ctx, acquireSQL(1), p.Topic, p.Group, member, now+int64(ttl), now, p.Partition).Scan(&tok, new(int64))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil // another member's live lease
	}
	if err != nil {
		return 0, false, s.errorf("lease %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return uint64(tok), true, nil
}

// acquireSQL is the conditional upsert of AcquireLease for n partitions
// ($6 to $5+n) of group $2 on topic $1, to member $3 until $4, at now
// $5: one row each, granted as AcquireLease grants it. It returns the
// token and partition of each row granted; a partition it does not
// return is another member's live lease.
func acquireSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO promlib_leases (topic, grp, part, member, expires, token) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "($1, $2, $%d, $3, $4, 1)", 6+i)
	}
	b.WriteString(`
		ON CONFLICT (topic, grp, part) DO UPDATE SET member = excluded.member, expires = excluded.expires,
			token = CASE WHEN promlib_leases.member = excluded.member AND promlib_leases.token > 0
				THEN promlib_leases.token ELSE promlib_leases.token + 1 END
		WHERE promlib_leases.member = excluded.member OR promlib_leases.expires <= $5
		RETURNING token, part`)
	return b.String()
}

// ReleaseLease implements [event.LeaseStore]. The row stays, to keep the
// partition's token: it is marked released (no member, expired) and its
// token raised, so that the next grant, to any member (even one named ""),
// gets a token greater than any granted before.
func (s *Store) ReleaseLease(ctx context.Context, p event.PartitionRef, member string) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	_, err := s.exec(ctx, `UPDATE promlib_leases SET member = '', expires = 0, token = token + 1
		WHERE topic = $1 AND grp = $2 AND part = $3 AND member = $4`,
		p.Topic, p.Group, p.Partition, member)
	if err != nil {
		return s.errorf("release %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}

// TakeLease implements [event.LeaseStore] with one upsert that grants the
// row to member whoever holds it and raises its token (a first grant
// inserts 1): greater than any granted for p before, as AcquireLease's
// tokens count on in the same row. In PostgreSQL the upsert waits for a
// fenced write that holds the row (FOR SHARE) to commit, and a fenced
// write that comes after reads the new holder and is refused, as with a
// take-over by AcquireLease (see [Store.fenced]).
func (s *Store) TakeLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, error) {
	if err := checkPartition(p.Partition); err != nil {
		return 0, err
	}
	now := s.cfg.Clock.Now().UnixNano()
	var tok int64
	err := s.w.QueryRowContext(ctx, `INSERT INTO promlib_leases (topic, grp, part, member, expires, token) VALUES ($1, $2, $3, $4, $5, 1)
		ON CONFLICT (topic, grp, part) DO UPDATE SET member = excluded.member, expires = excluded.expires,
			token = promlib_leases.token + 1
		RETURNING token`,
		p.Topic, p.Group, p.Partition, member, now+int64(ttl)).Scan(&tok)
	if err != nil {
		return 0, s.errorf("take lease %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return uint64(tok), nil
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

// UpdateGroupState implements [event.GroupStateStore], in one transaction,
// which checks a non-zero fence first (see [Store.fenced]). A fenced update
// that changes nothing still checks the fence.
func (s *Store) UpdateGroupState(ctx context.Context, p event.PartitionRef, u event.GroupStateUpdate, f event.Fence) error {
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
	if u.IsZero() && f.IsZero() {
		return nil
	}
	key := []any{p.Topic, p.Group, p.Partition}
	write := func(tx *sql.Tx, _ int64) error {
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
	}
	var err error
	if f.IsZero() {
		err = s.inTx(ctx, func(tx *sql.Tx) error { return write(tx, 0) })
	} else {
		err = s.fenced(ctx, p, f, write)
	}
	if errors.Is(err, event.ErrLeaseLost) {
		return err
	}
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
