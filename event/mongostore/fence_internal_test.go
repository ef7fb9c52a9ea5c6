package mongostore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testmongo"
)

// fakeStore returns a store on clk in a fresh database.
func fakeStore(t *testing.T, clk clock.Clock) *Store {
	t.Helper()
	s, err := New(testmongo.Client(t), Config{Database: testmongo.DB(t).Name(), Clock: clk})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.EnsureIndexes(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Close(ctx))
	})
	return s
}

// A fenced group-state write is a check of the lease and then a write. A
// grant to another member that returns between the two holds the write
// off: the grant set the document's token above the writer's.
func TestGroupStateWriteAfterTakeOverBetweenCheckAndWrite(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := fakeStore(t, clk)
	ctx := context.Background()
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	const ttl = 10 * time.Second
	settled := func() []uint64 {
		t.Helper()
		st, err := s.GroupState(ctx, p)
		require.NoError(t, err)
		return st.Settled
	}

	ta, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	a := event.Fence{Member: "a", Token: ta}
	require.NoError(t, s.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{5}}, a))

	// a passes its check, stalls past its lease, and b takes the
	// partition before a's write reaches the server.
	var tb uint64
	s.afterFenceCheck = func() {
		s.afterFenceCheck = nil
		clk.Advance(ttl + time.Second)
		tok, ok, err := s.AcquireLease(ctx, p, "b", ttl)
		require.NoError(t, err)
		require.True(t, ok)
		tb = tok
	}
	err = s.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{7}}, a)
	assert.ErrorIs(t, err, event.ErrLeaseLost, "the old holder's write after the grant returned")
	assert.Greater(t, tb, ta)
	assert.Equal(t, []uint64{5}, settled(), "the refused write changed nothing")

	b := event.Fence{Member: "b", Token: tb}
	require.NoError(t, s.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{8}, Forget: []uint64{5}}, b))
	assert.Equal(t, []uint64{8}, settled(), "the new holder writes")

	// What remains: the lease runs out between the check and the write,
	// and nobody takes it. The write lands, as if it had been written
	// just before the lease ran out.
	s.afterFenceCheck = func() {
		s.afterFenceCheck = nil
		clk.Advance(ttl + time.Second)
	}
	require.NoError(t, s.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{9}}, b))
	assert.Equal(t, []uint64{8, 9}, settled())
	err = s.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{10}}, b)
	assert.ErrorIs(t, err, event.ErrLeaseLost, "a write checked after the lease ran out")
}

// After DeleteGroup, tokens start over; a group-state document that a
// former holder wrote again while DeleteGroup ran, with a greater token,
// does not hold the new holder's writes off: its grant sets the token.
func TestGroupStateTokenAfterDeleteGroup(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := fakeStore(t, clk)
	ctx := context.Background()
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	require.NoError(t, s.CommitCursor(ctx, p, 0, event.Fence{}))
	var tok uint64
	for range 3 { // raise the token
		require.NoError(t, s.ReleaseLease(ctx, p, "a"))
		var ok bool
		var err error
		tok, ok, err = s.AcquireLease(ctx, p, "a", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.Greater(t, tok, uint64(1))
	s.afterFenceCheck = func() {
		s.afterFenceCheck = nil
		require.NoError(t, s.DeleteGroup(ctx, p.Topic, p.Group))
	}
	require.NoError(t, s.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{3}}, event.Fence{Member: "a", Token: tok}),
		"a write checked before DeleteGroup lands after it")

	t1, ok, err := s.AcquireLease(ctx, p, "b", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, uint64(1), t1, "tokens start over")
	require.NoError(t, s.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{4}}, event.Fence{Member: "b", Token: t1}))
	st, err := s.GroupState(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, []uint64{3, 4}, st.Settled)
}
