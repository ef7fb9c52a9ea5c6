package sqlstore

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/promethean/promlib/event"
)

var _ event.LeaseRenewer = (*Store)(nil)

// Renew implements [event.LeaseRenewer] in one write transaction of two
// statements: the upsert of the member's row that Heartbeat runs, then
// AcquireLease's conditional upsert of the lease rows of parts, one row
// per partition in one statement, each granted as AcquireLease grants it.
// A heartbeat refused for the member's tombstone rolls the transaction
// back: no lease is renewed. The members alive are then read as
// Heartbeat reads them, outside the transaction, which holds the
// database's write lock (SQLite) for the two statements only.
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
	sorted := slices.Sorted(slices.Values(parts))
	granted := make(map[int]uint64, len(parts))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.heartbeatSQL(), topic, group, member, now+int64(ttl), now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errLeft
		}
		if len(sorted) == 0 {
			return nil
		}
		args := []any{topic, group, member, now + int64(ttl), now}
		for _, p := range sorted {
			args = append(args, p)
		}
		rows, err := tx.QueryContext(ctx, acquireSQL(len(sorted)), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var tok, p int64
			if err := rows.Scan(&tok, &p); err != nil {
				return err
			}
			granted[int(p)] = uint64(tok)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, nil, s.errorf("renew %q in %q/%q: %w", member, topic, group, err)
	}
	members, err := s.liveMembers(ctx, topic, group, member, now)
	if err != nil {
		return nil, nil, err
	}
	grants := make([]event.LeaseGrant, len(parts))
	for i, p := range parts {
		tok, ok := granted[p]
		grants[i] = event.LeaseGrant{Partition: p, Token: tok, Held: ok}
	}
	return members, grants, nil
}
