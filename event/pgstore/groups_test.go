package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// TestTakeLeaseWaitsForAFencedCommit shows that TakeLease is ordered with
// fenced writes as AcquireLease is: a's commit has checked its live lease
// and waits (for a row lock the test holds on the cursor) to write; the
// operator's TakeLease must wait for the commit, and after it a's writes
// are refused.
func TestTakeLeaseWaitsForAFencedCommit(t *testing.T) {
	t.Parallel()
	s, _ := fencedStore(t)
	ctx := context.Background()
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	const ttl = 10 * time.Second
	ta, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	a := event.Fence{Member: "a", Token: ta}
	require.NoError(t, s.CommitCursor(ctx, p, 1, a))

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

	type taken struct {
		token uint64
		err   error
	}
	took := make(chan taken, 1)
	go func() {
		tok, err := s.TakeLease(ctx, p, "operator", ttl)
		took <- taken{tok, err}
	}()
	waitBlocked(t, s.DB(), commitPID, took, "the operator took the lease between a's check and a's write")

	require.NoError(t, hold.Rollback())
	require.NoError(t, <-committed, "a's commit checked a live lease and is ordered before the take")
	got := <-took
	require.NoError(t, got.err)
	assert.Greater(t, got.token, ta)
	assert.ErrorIs(t, s.CommitCursor(ctx, p, 6, a), event.ErrLeaseLost, "a's commits after the take")
	c, err := s.Cursors(ctx, p.Topic, p.Group)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), c[p.Partition])
}

// TestExpireGroupWaitsForAHeartbeat shows that an expiry waits for a
// heartbeat in progress, which holds the group's row for its statement,
// and then sees its member: the group is kept. (The heartbeat is the
// store's statement, written out in a transaction the test holds open.)
func TestExpireGroupWaitsForAHeartbeat(t *testing.T) {
	t.Parallel()
	s, clk := fencedStore(t)
	ctx := context.Background()
	const ttl = 10 * time.Second
	require.NoError(t, s.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "g"}, 0, event.Fence{}))
	clk.Advance(time.Hour)
	far := clk.Now().Add(time.Hour).UnixMilli()

	hb, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer hb.Rollback()
	var pid int
	require.NoError(t, hb.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	now := clk.Now().UnixNano()
	_, err = hb.ExecContext(ctx, `INSERT INTO promlib_members (topic, grp, member, expires, left_at)
		SELECT $1, $2, $3, $4, 0 FROM (SELECT COUNT(*) AS n FROM (
			SELECT 1 AS one FROM promlib_groups WHERE topic = $1 AND grp = $2 FOR KEY SHARE) AS g) AS held WHERE true
		ON CONFLICT (topic, grp, member) DO UPDATE SET expires = excluded.expires, left_at = 0
		WHERE promlib_members.left_at = 0 OR promlib_members.left_at < $5`, "t", "g", "m", now+int64(ttl), now)
	require.NoError(t, err)

	expired := make(chan error, 1)
	var done bool
	go func() {
		var err error
		done, err = s.ExpireGroup(ctx, "t", "g", far)
		expired <- err
	}()
	waitBlocked(t, s.DB(), pid, expired, "the expiry did not wait for the heartbeat in progress")
	require.NoError(t, hb.Commit())
	require.NoError(t, <-expired)
	assert.False(t, done, "the expiry sees the member the heartbeat made live")
	gis, err := s.ListGroups(ctx, "t")
	require.NoError(t, err)
	require.Len(t, gis, 1)
	assert.Equal(t, []string{"m"}, gis[0].Members)
}

// TestHeartbeatWaitsForAnExpiry shows the other order: an expiry that
// has locked the group's row (its first statement) and not ended makes
// a heartbeat wait, so no member joins between the expiry's check and its
// delete; the heartbeat writes its member after the group is gone. (The
// expiry is the store's statements, written out in a transaction the
// test holds open.)
func TestHeartbeatWaitsForAnExpiry(t *testing.T) {
	t.Parallel()
	s, _ := fencedStore(t)
	ctx := context.Background()
	const ttl = 10 * time.Second
	require.NoError(t, s.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "g"}, 0, event.Fence{}))

	exp, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer exp.Rollback()
	var pid int
	require.NoError(t, exp.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	_, err = exp.ExecContext(ctx, `SELECT at FROM promlib_groups WHERE topic = 't' AND grp = 'g' FOR UPDATE`)
	require.NoError(t, err)

	type beat struct {
		live []string
		err  error
	}
	beats := make(chan beat, 1)
	go func() {
		live, err := s.Heartbeat(ctx, "t", "g", "m", ttl)
		beats <- beat{live, err}
	}()
	waitBlocked(t, s.DB(), pid, beats, "the heartbeat did not wait for the expiry in progress")
	for _, table := range []string{"promlib_groups", "promlib_leases", "promlib_cursors", "promlib_members", "promlib_group_state"} {
		_, err := exp.ExecContext(ctx, `DELETE FROM `+table+` WHERE topic = 't' AND grp = 'g'`)
		require.NoError(t, err)
	}
	require.NoError(t, exp.Commit())
	got := <-beats
	require.NoError(t, got.err)
	assert.Equal(t, []string{"m"}, got.live, "the member's row is written after the expiry")
	gis, err := s.ListGroups(ctx, "t")
	require.NoError(t, err)
	assert.Empty(t, gis, "the group is gone")
}

// TestExpireGroupWaitsForAFencedCommit shows that an expiry waits for a
// fenced commit that has checked its lease, and then reads the commit's
// time: a's commit waits (for a row lock the test holds on the cursor) to
// write, the expiry locks the lease rows and must wait for the commit,
// and then finds the group active at the cut-off. A commit after the
// expiry finds its lease gone.
func TestExpireGroupWaitsForAFencedCommit(t *testing.T) {
	t.Parallel()
	s, clk := fencedStore(t)
	ctx := context.Background()
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	const ttl = 10 * time.Minute
	ta, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	a := event.Fence{Member: "a", Token: ta}
	require.NoError(t, s.CommitCursor(ctx, p, 1, a))
	clk.Advance(time.Minute)
	cut := clk.Now().UnixMilli() // the group was last active before it

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

	expired := make(chan error, 1)
	var done bool
	go func() {
		var err error
		done, err = s.ExpireGroup(ctx, "t", "g", cut)
		expired <- err
	}()
	waitBlocked(t, s.DB(), commitPID, expired, "the expiry did not wait for a's commit")
	require.NoError(t, hold.Rollback())
	require.NoError(t, <-committed)
	require.NoError(t, <-expired)
	assert.False(t, done, "the expiry reads the commit's time")

	done, err = s.ExpireGroup(ctx, "t", "g", cut+1)
	require.NoError(t, err)
	assert.True(t, done)
	assert.ErrorIs(t, s.CommitCursor(ctx, p, 6, a), event.ErrLeaseLost, "a commit after the expiry")
	c, err := s.Cursors(ctx, p.Topic, p.Group)
	require.NoError(t, err)
	assert.Empty(t, c)
}
