package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// clocked returns a store of the suite's kind on a fake clock, failing the
// test when the suite was given no way to make one.
func clocked(t *testing.T, s event.Store, o Options) (event.Store, *clock.Fake) {
	t.Helper()
	if _, ok := s.(event.LeaseStore); !ok {
		t.Skip("store does not implement LeaseStore")
	}
	if o.Clocked == nil {
		t.Fatal("storetest: Options.Clocked is needed by a store that implements LeaseStore")
	}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	return o.Clocked(t, clk), clk
}

// testFencedWrites checks the lease tokens and the fence of cursor commits
// and group-state writes: a write is applied only under the live lease
// that granted its token, on the store's clock.
func testFencedWrites(t *testing.T, s event.Store, o Options) {
	s, clk := clocked(t, s, o)
	ctx := context.Background()
	ls := s.(event.LeaseStore)
	cs := s.(event.CursorStore)
	gs, hasState := s.(event.GroupStateStore)
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 1}
	const ttl = 10 * time.Second

	cursor := func() uint64 {
		t.Helper()
		c, err := cs.Cursors(ctx, p.Topic, p.Group)
		require.NoError(t, err)
		return c[p.Partition]
	}
	settled := func() []uint64 {
		t.Helper()
		st, err := gs.GroupState(ctx, p)
		require.NoError(t, err)
		return st.Settled
	}

	ta, ok, err := ls.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.NotZero(t, ta, "a granted lease has a token")
	a := event.Fence{Member: "a", Token: ta}
	require.NoError(t, cs.CommitCursor(ctx, p, 3, a), "the holder commits")
	assert.Equal(t, uint64(3), cursor())
	if hasState {
		require.NoError(t, gs.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{5}}, a))
		assert.Equal(t, []uint64{5}, settled())
	}

	clk.Advance(ttl / 2)
	tr, ok, err := ls.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, ta, tr, "a renewal keeps the token")

	err = cs.CommitCursor(ctx, p, 4, event.Fence{Member: "a", Token: ta + 1000})
	assert.ErrorIs(t, err, event.ErrLeaseLost, "a token the store never granted")
	err = cs.CommitCursor(ctx, p, 4, event.Fence{Member: "b", Token: ta})
	assert.ErrorIs(t, err, event.ErrLeaseLost, "another member with the holder's token")
	assert.Equal(t, uint64(3), cursor(), "refused commits change nothing")

	// a stalls past its lease: nothing it writes lands, even before
	// another member takes the partition.
	clk.Advance(ttl + time.Second)
	err = cs.CommitCursor(ctx, p, 6, a)
	assert.ErrorIs(t, err, event.ErrLeaseLost, "a commit under an expired lease")
	assert.ErrorContains(t, err, `"a"`, "the error names the member")
	assert.Equal(t, uint64(3), cursor())
	if hasState {
		err = gs.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{7}}, a)
		assert.ErrorIs(t, err, event.ErrLeaseLost, "a state write under an expired lease")
		assert.Equal(t, []uint64{5}, settled())
	}

	// Nobody took it: a gets its token back, and its writes land again.
	tr, ok, err = ls.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, ta, tr, "a lease that ran out unused comes back with its token")
	require.NoError(t, cs.CommitCursor(ctx, p, 6, a))
	assert.Equal(t, uint64(6), cursor())

	// a stalls again, and b takes the partition.
	clk.Advance(ttl + time.Second)
	tb, ok, err := ls.AcquireLease(ctx, p, "b", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, tb, ta, "a take-over gets a greater token")
	b := event.Fence{Member: "b", Token: tb}
	err = cs.CommitCursor(ctx, p, 9, a)
	assert.ErrorIs(t, err, event.ErrLeaseLost, "the old holder's commit after a take-over")
	if hasState {
		err = gs.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{8}}, a)
		assert.ErrorIs(t, err, event.ErrLeaseLost, "the old holder's state write after a take-over")
		require.NoError(t, gs.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{10}}, b))
		assert.Equal(t, []uint64{5, 10}, settled())
	}
	require.NoError(t, cs.CommitCursor(ctx, p, 7, b))
	assert.Equal(t, uint64(7), cursor())

	// b releases; a takes it again and must get a new token: b may have
	// moved the partition on.
	require.NoError(t, ls.ReleaseLease(ctx, p, "b"))
	err = cs.CommitCursor(ctx, p, 8, b)
	assert.ErrorIs(t, err, event.ErrLeaseLost, "a commit after the release")
	ta2, ok, err := ls.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, ta2, tb, "a grant after another holder gets a greater token")
	err = cs.CommitCursor(ctx, p, 9, a)
	assert.ErrorIs(t, err, event.ErrLeaseLost, "a's old token stays refused")
	require.NoError(t, cs.CommitCursor(ctx, p, 9, event.Fence{Member: "a", Token: ta2}))
	assert.Equal(t, uint64(9), cursor())

	// A member releasing its own lease and taking it again gets a new
	// token too: it handed the partition over.
	require.NoError(t, ls.ReleaseLease(ctx, p, "a"))
	ta3, ok, err := ls.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, ta3, ta2, "a grant after a release gets a greater token")

	// Unfenced writes (a group's first cursors, an operator's repair) are
	// not checked.
	require.NoError(t, cs.CommitCursor(ctx, p, 12, event.Fence{}))
	assert.Equal(t, uint64(12), cursor())

	// Tokens are per partition: another partition's lease has its own.
	q := event.PartitionRef{Topic: "t", Group: "g", Partition: 2}
	tq, ok, err := ls.AcquireLease(ctx, q, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	err = cs.CommitCursor(ctx, p, 13, event.Fence{Member: "a", Token: tq})
	if tq != ta3 {
		assert.ErrorIs(t, err, event.ErrLeaseLost, "another partition's token")
	}
	require.NoError(t, cs.CommitCursor(ctx, q, 2, event.Fence{Member: "a", Token: tq}))
}
