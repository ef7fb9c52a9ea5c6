package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testDeadLettersAcrossBuses: the dead letters of a group whose member
// runs in one Bus are listed, redriven and purged by another Bus sharing
// the store (an operator's process): the marks are the store's, so both
// see the same pending dead letters, a redrive reaches the running member
// and no record is redriven twice, also when two Buses redrive at once.
func testDeadLettersAcrossBuses(t *testing.T, s event.Store) {
	ctx := context.Background()
	consumer, operator, other := newBus(t, s), newBus(t, s), newBus(t, s)
	var failing atomic.Bool
	failing.Store(true)
	billing := newCollector()
	subscribe(t, consumer, "orders", "billing", func(ctx context.Context, d *event.Delivery) error {
		billing.add(d)
		if failing.Load() {
			return errors.New("no price")
		}
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(1))
	recs := pubN(t, operator, "orders", 6)

	var page event.DeadLetterPage
	require.Eventually(t, func() bool {
		var err error
		page, err = operator.DeadLetters(ctx, "orders", "billing", 0, 100)
		require.NoError(t, err)
		return len(page.Records) == len(recs) && page.DeadLetters.Pending == uint64(len(recs))
	}, wait, tick, "dead letters: %+v", page.DeadLetters)
	assert.Equal(t, event.DeadLetterSummary{Topic: "orders.dlq", Head: 6, Pending: 6}, page.DeadLetters)
	for i, d := range page.Records {
		assert.Equal(t, recs[i].ID, d.Headers[event.HeaderDLQID])
	}
	failing.Store(false)

	// Purge the first, redrive the second by id.
	res, err := operator.PurgeDeadLetters(ctx, "orders", "billing", []string{page.Records[0].ID}, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{page.Records[0].ID}, res.IDs)
	res, err = operator.RedriveDeadLetters(ctx, "orders", "billing", []string{page.Records[1].ID}, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{page.Records[1].ID}, res.IDs)
	left, err := consumer.DeadLetters(ctx, "orders", "billing", 0, 100)
	require.NoError(t, err)
	assert.Equal(t, page.Records[2:], left.Records, "the consumer's Bus sees the marks")
	assert.Equal(t, uint64(4), left.DeadLetters.Pending)

	// Two Buses redrive the rest at once: each record once.
	var wg sync.WaitGroup
	var got [2][]string
	for i, b := range []*event.Bus{operator, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.RedriveDeadLetters(ctx, "orders", "billing", nil, 100)
			assert.NoError(t, err)
			got[i] = r.IDs
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for _, d := range page.Records[2:] {
		ids[d.ID] = true
	}
	for _, id := range append(got[0], got[1]...) {
		assert.True(t, ids[id], "redriven: %s", id)
	}
	assert.GreaterOrEqual(t, len(got[0])+len(got[1]), 4, "every record left was redriven")
	require.Eventually(t, func() bool { return billing.len() == 6+5 }, wait, tick,
		"the member gets each redriven record once: %d deliveries", billing.len())
	head, err := s.Head(ctx, event.RedriveTopic("orders", "billing"))
	require.NoError(t, err)
	assert.Equal(t, uint64(5), head, "each redriven record stored once")
	billing.mu.Lock()
	for i, r := range recs[1:] {
		assert.Equal(t, 2, billing.seqs[r.Seq], "record %d: the first delivery and its redrive", i+1)
	}
	assert.Equal(t, 1, billing.seqs[recs[0].Seq], "the purged one is not redriven")
	billing.mu.Unlock()
	left, err = other.DeadLetters(ctx, "orders", "billing", 0, 100)
	require.NoError(t, err)
	assert.Empty(t, left.Records)
	assert.Zero(t, left.DeadLetters.Pending)
	_, err = other.RedriveDeadLetters(ctx, "orders", "billing", []string{page.Records[3].ID}, 0)
	assert.ErrorIs(t, err, event.ErrNotFound, "done already")
}

// testGroupStatusAcrossBuses: the status of a group read by a Bus that
// has no member of it shows the member of another Bus (members, partition
// owners) and no Local; the member's own Bus shows its Local.
func testGroupStatusAcrossBuses(t *testing.T, s event.Store) {
	ctx := context.Background()
	member, admin := newBus(t, s), newBus(t, s)
	pubN(t, admin, "t", 3)
	subscribe(t, member, "t", "g", nopHandler, event.FromEarliest(), event.WithMaxAttempts(3))
	waitCursor(t, member, "t", "g", 3)
	var st event.GroupStatus
	require.Eventually(t, func() bool {
		var err error
		st, err = admin.GroupStatus(ctx, "t", "g")
		require.NoError(t, err)
		return len(st.Members) == 1 && len(st.Partitions) > 0 && st.Partitions[0].Owner != ""
	}, wait, tick, "the member and its partitions: %+v", st)
	assert.Equal(t, uint64(3), st.Head)
	assert.Equal(t, uint64(3), st.Committed)
	assert.Zero(t, st.Lag)
	assert.Nil(t, st.Oldest)
	assert.Nil(t, st.Local, "no subscriber in the admin's Bus")
	require.NotNil(t, st.Config)
	assert.Equal(t, 3, st.Config.MaxAttempts)
	assert.Equal(t, st.Members[0], st.Partitions[0].Owner)
	mine, err := member.GroupStatus(ctx, "t", "g")
	require.NoError(t, err)
	require.NotNil(t, mine.Local)
	assert.Equal(t, 1, mine.Local.Subscribers)
	all, err := admin.GroupStatuses(ctx, "t")
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, "g", all[0].Group)
	_, err = admin.GroupStatus(ctx, "t", "nobody")
	assert.ErrorIs(t, err, event.ErrNotFound)
}

// testDeleteGroupWithMembers: a group with a live member in another Bus
// is not deleted unless forced (the error names the member); forced, it
// is deleted (the member, still running, may bring it back: a store may
// start the lease tokens over, so whether the member's delivery in flight
// is given up depends on the store). Once the member has left, the group,
// its settings and its redrive cursors are deleted.
func testDeleteGroupWithMembers(t *testing.T, s event.Store) {
	if _, ok := s.(event.Lister); !ok {
		t.Skip("store does not implement Lister")
	}
	ctx := context.Background()
	member, admin := newBus(t, s), newBus(t, s)
	pubN(t, admin, "t", 2)
	held := make(chan *event.Delivery, 16)
	sub := subscribe(t, member, "t", "g", func(_ context.Context, d *event.Delivery) error {
		select {
		case held <- d:
		default:
		}
		return nil
	}, event.FromEarliest(), event.WithManualAck(), event.WithMaxInFlight(1), event.WithAckTimeout(time.Minute))
	<-held
	var members []string
	require.Eventually(t, func() bool {
		st, err := admin.GroupStatus(ctx, "t", "g")
		require.NoError(t, err)
		members = st.Members
		return len(members) == 1
	}, wait, tick)

	err := admin.DeleteGroup(ctx, "t", "g", false)
	require.ErrorIs(t, err, event.ErrGroupActive)
	assert.ErrorContains(t, err, members[0])
	require.NoError(t, admin.DeleteGroup(ctx, "t", "g", true))
	require.NoError(t, sub.Close())

	rt := event.RedriveTopic("t", "g")
	require.NoError(t, s.(event.CursorStore).CommitCursor(ctx, event.PartitionRef{Topic: rt, Group: "g"}, 1, event.Fence{}))
	require.NoError(t, admin.DeleteGroup(ctx, "t", "g", false), "no member left")
	_, err = admin.GroupStatus(ctx, "t", "g")
	assert.ErrorIs(t, err, event.ErrNotFound)
	_, err = admin.GroupConfig(ctx, "t", "g")
	assert.ErrorIs(t, err, event.ErrNotFound)
	cur, err := s.(event.CursorStore).Cursors(ctx, rt, "g")
	require.NoError(t, err)
	assert.Empty(t, cur, "the redrive cursors go with the group")
}
