package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testRenew checks LeaseRenewer.Renew: a heartbeat and, for each
// partition, what AcquireLease would do, with the same tokens.
func testRenew(t *testing.T, s event.Store, o Options) {
	s, clk := clocked(t, s, o)
	r, ok := s.(event.LeaseRenewer)
	if !ok {
		t.Skip("store does not implement LeaseRenewer")
	}
	ctx := context.Background()
	cs := s.(event.CursorStore)
	const ttl = 10 * time.Second
	ref := func(p int) event.PartitionRef { return event.PartitionRef{Topic: "t", Group: "g", Partition: p} }
	acquire := func(p int, member string) (uint64, bool) {
		t.Helper()
		tok, ok, err := r.AcquireLease(ctx, ref(p), member, ttl)
		require.NoError(t, err)
		return tok, ok
	}
	grant := func(p int, tok uint64) event.LeaseGrant {
		return event.LeaseGrant{Partition: p, Token: tok, Held: true}
	}
	lost := func(p int) event.LeaseGrant { return event.LeaseGrant{Partition: p} }

	for _, parts := range [][]int{{1, 1}, {-1}, {event.MaxPartitions}} {
		_, _, err := r.Renew(ctx, "t", "g", "a", ttl, parts)
		assert.ErrorIs(t, err, event.ErrInvalid, "parts %v", parts)
	}

	members, leases, err := r.Renew(ctx, "t", "g", "a", ttl, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, members, "a renewal without partitions is a heartbeat")
	assert.Empty(t, leases)
	_, err = r.Heartbeat(ctx, "t", "g", "b", time.Hour)
	require.NoError(t, err)

	ta0, ok := acquire(0, "a")
	require.True(t, ok)
	ta1, ok := acquire(1, "a")
	require.True(t, ok)
	tb2, ok := acquire(2, "b")
	require.True(t, ok)

	clk.Advance(ttl / 2)
	members, leases, err = r.Renew(ctx, "t", "g", "a", ttl, []int{1, 0, 2, 3})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, members, "the members alive, sorted")
	require.Len(t, leases, 4, "one grant per partition, in the order asked")
	assert.Equal(t, grant(1, ta1), leases[0], "a renewal keeps the token")
	assert.Equal(t, grant(0, ta0), leases[1], "a renewal keeps the token")
	assert.Equal(t, lost(2), leases[2], "another member's live lease is refused")
	assert.True(t, leases[3].Held, "a partition never leased is granted")
	assert.NotZero(t, leases[3].Token, "a granted lease has a token")
	tok, ok := acquire(2, "b")
	assert.True(t, ok, "another member's lease is left to it")
	assert.Equal(t, tb2, tok, "another member's lease keeps its token")

	// The renewal extended a's leases from when it was made.
	clk.Advance(ttl/2 + time.Second)
	_, ok = acquire(0, "b")
	assert.False(t, ok, "a renewed lease is live for ttl from the renewal")
	require.NoError(t, cs.CommitCursor(ctx, ref(0), 3, event.Fence{Member: "a", Token: ta0}), "the renewed token fences writes")

	// a stalls past its leases; b takes partition 1, nobody takes 0.
	clk.Advance(ttl + time.Second)
	tb1, ok := acquire(1, "b")
	require.True(t, ok)
	require.Greater(t, tb1, ta1)
	_, leases, err = r.Renew(ctx, "t", "g", "a", ttl, []int{0, 1})
	require.NoError(t, err)
	assert.Equal(t, []event.LeaseGrant{grant(0, ta0), lost(1)}, leases,
		"an expired lease nobody took comes back with its token; one another member took is lost")
	tok, ok = acquire(1, "b")
	assert.True(t, ok, "the taker keeps the partition")
	assert.Equal(t, tb1, tok)

	// A lease released or taken over is granted again with a new token.
	require.NoError(t, r.ReleaseLease(ctx, ref(0), "a"))
	require.NoError(t, r.ReleaseLease(ctx, ref(1), "b"))
	_, leases, err = r.Renew(ctx, "t", "g", "a", ttl, []int{0, 1})
	require.NoError(t, err)
	require.Len(t, leases, 2)
	assert.True(t, leases[0].Held && leases[1].Held, "released leases are free")
	assert.Greater(t, leases[0].Token, ta0, "a grant after a release gets a greater token")
	assert.Greater(t, leases[1].Token, tb1, "a grant after another holder gets a greater token")
	err = cs.CommitCursor(ctx, ref(0), 4, event.Fence{Member: "a", Token: ta0})
	assert.ErrorIs(t, err, event.ErrLeaseLost, "the token of the released holding is refused")

	// A member that left is not brought back by a heartbeat or renewal
	// stamped no later than its Leave (one its caller gave up on, applied
	// late); and a refused renewal renews no lease.
	_, ok = acquire(5, "x")
	require.True(t, ok)
	clk.Advance(ttl / 2)
	require.NoError(t, r.Leave(ctx, "t", "g", "x"))
	require.NoError(t, r.Leave(ctx, "t", "g", "y"))
	_, hbErr := r.Heartbeat(ctx, "t", "g", "y", ttl)
	assert.Error(t, hbErr, "a heartbeat stamped no later than its member's Leave brought the member back (see LeaseStore.Leave)")
	_, _, err = r.Renew(ctx, "t", "g", "x", ttl, []int{5})
	assert.Error(t, err, "a renewal after Leave is refused as a heartbeat is")
	members, err = r.Heartbeat(ctx, "t", "g", "b", time.Hour)
	require.NoError(t, err)
	assert.NotContains(t, members, "x", "a refused renewal does not bring the member back")
	assert.NotContains(t, members, "y")
	clk.Advance(ttl/2 + time.Second)
	_, ok = acquire(5, "b")
	assert.True(t, ok, "a refused renewal renews no lease")
}
