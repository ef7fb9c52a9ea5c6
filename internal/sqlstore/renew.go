package sqlstore

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/promethean/promlib/event"
)

var _ event.LeaseRenewer = (*Store)(nil)

// renewReq is one Renew: what it writes, and what the write answered.
type renewReq struct {
	ctx                  context.Context // the caller's; a renewal it gave up on is not written
	topic, group, member string
	expires, now         int64          // Unix ns
	parts                []int          // ascending
	granted              map[int]uint64 // token of each partition granted
	err                  error
	done                 chan struct{} // closed when err and granted are set (batched renewals)
}

// Renew implements [event.LeaseRenewer] in one write transaction of two
// statements: the upsert of the member's row that Heartbeat runs, then
// AcquireLease's conditional upsert of the lease rows of parts, one row
// per partition in one statement, each granted as AcquireLease grants it.
// A heartbeat refused for the member's tombstone writes nothing, and no
// lease is renewed. The members alive are then read as Heartbeat reads
// them, outside the transaction, which holds the database's write lock
// (SQLite) for the two statements only.
//
// Where the dialect asks for it (Dialect.BatchRenewals), concurrent
// renewals share their transaction: see renewer.
//
// The partitions are upserted in ascending order, so that two renewals
// of one group that name some of the same rows lock them in one order on
// PostgreSQL; the group's promlib_groups row is locked first by both
// (GroupLock), as by Heartbeat.
func (s *Store) Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) ([]string, []event.LeaseGrant, error) {
	if err := event.CheckRenewParts(parts); err != nil {
		return nil, nil, err
	}
	now := s.cfg.Clock.Now().UnixNano()
	r := &renewReq{
		ctx: ctx, topic: topic, group: group, member: member,
		expires: now + int64(ttl), now: now,
		parts:   slices.Sorted(slices.Values(parts)),
		granted: make(map[int]uint64, len(parts)),
	}
	var err error
	if s.d.BatchRenewals {
		err = s.renewBatched(ctx, r)
	} else {
		err = s.inTx(ctx, func(tx *sql.Tx) error { return s.renewIn(ctx, tx, r) })
	}
	if err != nil {
		return nil, nil, s.errorf("renew %q in %q/%q: %w", member, topic, group, err)
	}
	members, err := s.liveMembers(ctx, topic, group, member, now)
	if err != nil {
		return nil, nil, err
	}
	grants := make([]event.LeaseGrant, len(parts))
	for i, p := range parts {
		tok, ok := r.granted[p]
		grants[i] = event.LeaseGrant{Partition: p, Token: tok, Held: ok}
	}
	return members, grants, nil
}

// renewIn writes the renewal r in tx: the heartbeat's upsert, then, if it
// changed a row, the lease upsert of r's partitions, whose grants it puts
// in r.granted. A heartbeat refused for the member's tombstone changes no
// row: renewIn then returns errLeft, having written nothing.
func (s *Store) renewIn(ctx context.Context, tx *sql.Tx, r *renewReq) error {
	res, err := tx.ExecContext(ctx, s.heartbeatSQL(), r.topic, r.group, r.member, r.expires, r.now)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return errLeft
	}
	if len(r.parts) == 0 {
		return nil
	}
	args := make([]any, 0, 5+len(r.parts))
	args = append(args, r.topic, r.group, r.member, r.expires, r.now)
	for _, p := range r.parts {
		args = append(args, p)
	}
	rows, err := tx.QueryContext(ctx, acquireSQL(len(r.parts)), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var tok, p int64
		if err := rows.Scan(&tok, &p); err != nil {
			return err
		}
		r.granted[int(p)] = uint64(tok)
	}
	return rows.Err()
}
