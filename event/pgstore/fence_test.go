package pgstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/pgstore"
)

// leaseResult is what AcquireLease returned.
type leaseResult struct {
	token uint64
	ok    bool
	err   error
}

// blockedBy returns a backend that waits for a lock held by the backend
// pid, or 0 while there is none.
func blockedBy(t *testing.T, db *sql.DB, pid int) int {
	t.Helper()
	var waiter int
	err := db.QueryRowContext(context.Background(),
		`SELECT COALESCE(MIN(pid), 0) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiter)
	require.NoError(t, err)
	return waiter
}

// waitBlocked waits until a backend waits for a lock of pid and returns
// it, failing the test if done is closed (or sends) first: the call that
// was to wait did not.
func waitBlocked[T any](t *testing.T, db *sql.DB, pid int, done <-chan T, msg string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	ticker := time.NewTicker(5 * time.Millisecond)
	defer ticker.Stop()
	for {
		if w := blockedBy(t, db, pid); w != 0 {
			return w
		}
		select {
		case v := <-done:
			t.Fatalf("%s; it returned %v", msg, v)
		case <-ticker.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no backend waits for backend %d", msg, pid)
		}
	}
}

// fencedStore returns a store on a fake clock with connections to spare
// for the transactions that hold locks, the store's statements that wait
// for them and the look at pg_stat_activity.
func fencedStore(t *testing.T) (*pgstore.Store, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := newStore(t, func(c *pgstore.Config) { c.Clock = clk; c.MaxConns = 8 })
	return s, clk
}

// TestFencedCommitHoldsTheLease shows that a fenced commit holds the lease
// row from its check to its write: the commit has checked a's live lease
// and waits (for a row lock the test holds on the cursor) to write, a's
// lease expires by the clock, and b's take-over must wait for the commit.
// Without the row lock, b would be granted the partition between a's
// check and a's write, and a's write would land under b's lease.
func TestFencedCommitHoldsTheLease(t *testing.T) {
	t.Parallel()
	s, clk := fencedStore(t)
	ctx := context.Background()
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	const ttl = 10 * time.Second
	ta, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	a := event.Fence{Member: "a", Token: ta}
	require.NoError(t, s.CommitCursor(ctx, p, 1, a))

	// Hold the cursor row, so that a's next commit stops between its check
	// and its write.
	hold, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer hold.Rollback()
	var holdPID int
	require.NoError(t, hold.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&holdPID))
	_, err = hold.ExecContext(ctx, `SELECT seq FROM promlib_cursors WHERE topic = $1 AND grp = $2 AND part = $3 FOR UPDATE`, p.Topic, p.Group, p.Partition)
	require.NoError(t, err)

	committed := make(chan error, 1)
	go func() { committed <- s.CommitCursor(ctx, p, 5, a) }()
	commitPID := waitBlocked(t, s.DB(), holdPID, committed, "a's commit did not wait for the cursor row")

	clk.Advance(ttl + time.Second) // a's lease has expired by the store's clock
	acquired := make(chan leaseResult, 1)
	go func() {
		tok, ok, err := s.AcquireLease(ctx, p, "b", ttl)
		acquired <- leaseResult{tok, ok, err}
	}()
	waitBlocked(t, s.DB(), commitPID, acquired, "b was granted the lease between a's check and a's write")

	require.NoError(t, hold.Rollback())
	require.NoError(t, <-committed, "a's commit checked a live lease and is ordered before the take-over")
	got := <-acquired
	require.NoError(t, got.err)
	require.True(t, got.ok, "b takes the expired lease once a's write committed")
	assert.Greater(t, got.token, ta)

	c, err := s.Cursors(ctx, p.Topic, p.Group)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), c[p.Partition])
	assert.ErrorIs(t, s.CommitCursor(ctx, p, 6, a), event.ErrLeaseLost, "a's commits after the take-over")
	require.NoError(t, s.CommitCursor(ctx, p, 6, event.Fence{Member: "b", Token: got.token}))
}

// TestFencedCommitWaitsForATakeOver shows the other order: a take-over
// that updated the lease row and has not committed makes a's fenced
// commit wait, and once it commits a's commit reads the new holder and is
// refused. (The take-over is the store's upsert, written out in a
// transaction the test holds open.)
func TestFencedCommitWaitsForATakeOver(t *testing.T) {
	t.Parallel()
	s, clk := fencedStore(t)
	ctx := context.Background()
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	const ttl = 10 * time.Second
	ta, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	a := event.Fence{Member: "a", Token: ta}
	require.NoError(t, s.CommitCursor(ctx, p, 1, a))

	takeOver, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer takeOver.Rollback()
	var pid int
	require.NoError(t, takeOver.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	n, err := takeOver.ExecContext(ctx, `UPDATE promlib_leases SET member = 'b', token = token + 1, expires = $4
		WHERE topic = $1 AND grp = $2 AND part = $3`, p.Topic, p.Group, p.Partition, clk.Now().Add(ttl).UnixNano())
	require.NoError(t, err)
	rows, err := n.RowsAffected()
	require.NoError(t, err)
	require.Equal(t, int64(1), rows)

	committed := make(chan error, 1)
	go func() { committed <- s.CommitCursor(ctx, p, 5, a) }()
	waitBlocked(t, s.DB(), pid, committed, "a's commit did not wait for the take-over in progress")
	require.NoError(t, takeOver.Commit())
	assert.ErrorIs(t, <-committed, event.ErrLeaseLost, "a's commit reads b's grant after waiting")

	c, err := s.Cursors(ctx, p.Topic, p.Group)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), c[p.Partition], "the refused commit wrote nothing")
}
