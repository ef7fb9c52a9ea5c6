package storetest

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// RunBus checks the delivery semantics of event.Bus over stores made by
// newStore.
func RunBus(t *testing.T, newStore Factory, opts ...Options) {
	o := options(opts)
	tests := []struct {
		name string
		fn   func(t *testing.T, s event.Store)
	}{
		{"OrderBySeq", func(t *testing.T, s event.Store) { testOrder(t, s, o) }},
		{"IdempotentPublish", testIdempotentPublish},
		{"StartPositions", testStartPositions},
		{"GroupSettingsConflict", testGroupSettingsConflict},
		{"GroupUpdateReachesOtherBus", testGroupUpdateReachesOtherBus},
		{"ForcedResetMovesMembers", testForcedResetMovesMembers},
		{"GroupExpiry", func(t *testing.T, s event.Store) { testGroupExpiry(t, s, o) }},
		{"OutOfOrderAcksHoldTheCursor", testOutOfOrderAcks},
		{"NackRedelivers", testNackRedelivers},
		{"ExpiredLeaseRedelivers", testLeaseExpiry},
		{"ModAckExtendsTheLease", testModAck},
		{"StaleAckIsRefused", testStaleAck},
		{"DeadLetterAfterMaxAttempts", testDeadLetter},
		{"RestartResumesFromCursor", testRestart},
		{"GroupsAreIndependent", func(t *testing.T, s event.Store) { testTwoGroups(t, s, o) }},
		{"SubscribersShareTheGroup", func(t *testing.T, s event.Store) { testSharedGroup(t, s, o) }},
		{"MaxInFlightIsFlowControl", testMaxInFlight},
		{"Filter", testFilter},
		{"PauseResume", testPauseResume},
		{"CloseWithDeliveriesInFlight", testCloseInFlight},
		{"UnsubscribeGivesBackInFlight", testUnsubscribeGivesBack},
		{"BusesShareGroupPartitions", func(t *testing.T, s event.Store) { testSharedPartitions(t, s, o) }},
		{"MemberDeathRebalances", func(t *testing.T, s event.Store) { testRebalance(t, s, o) }},
		{"LocalSubscriptionsKeepOrder", testLocalSubscriptionsKeepOrder},
		{"StalledMemberLosesPartitions", testStalledMember},
		{"RebalanceWithRecordInFlight", func(t *testing.T, s event.Store) { testRebalanceInFlight(t, s, o) }},
		{"PartitionsFromTheStore", testPartitionsFromStore},
		{"AddPartitions", func(t *testing.T, s event.Store) { testAddPartitions(t, s, o) }},
		{"GroupProtocolSimulation", func(t *testing.T, s event.Store) { testSimulation(t, s, o) }},
		{"RebalanceHooks", func(t *testing.T, s event.Store) { testRebalanceHooks(t, s, o) }},
		{"KeyOrderedAcrossMembers", testKeyOrderedMembers},
		{"BehindRetentionIsReported", testBehindRetention},
		{"AcksOutliveSubscribers", testAcksOutliveSubscribers},
		{"AttemptsOutliveSubscribers", testAttemptsOutliveSubscribers},
		{"QueuedIsNoAttempt", testQueuedIsNoAttempt},
		{"LastAttemptLeftIsDeadLettered", testLastAttemptLeft},
		{"PipelinedPublishKeepsOrder", testPipelinedOrder},
		{"PipelinedPublishErrorsPerEvent", testPipelinedErrorsPerEvent},
		{"PipelinedPublishWindow", testPipelinedWindow},
		{"BinaryPayloadsThroughTheBus", testBinaryThroughBus},
		{"RedriveReachesRunningMembersOfOtherBuses", testRedriveAcrossBuses},
		{"DeadLettersAcrossBuses", testDeadLettersAcrossBuses},
		{"GroupStatusAcrossBuses", testGroupStatusAcrossBuses},
		{"DeleteGroupWithMembers", testDeleteGroupWithMembers},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// newBus returns a Bus with test timings, closed at the end of the test.
func newBus(t *testing.T, s event.Store, mod ...func(*event.Config)) *event.Bus {
	t.Helper()
	cfg := event.Config{
		PollInterval:   10 * time.Millisecond,
		CommitInterval: 5 * time.Millisecond,
		LeaseTTL:       2 * time.Second,
	}
	for _, m := range mod {
		m(&cfg)
	}
	b, err := event.NewBus(s, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, b.Close(ctx))
	})
	return b
}

func subscribe(t *testing.T, b *event.Bus, topic, group string, h event.Handler, opts ...event.SubscribeOption) *event.Subscription {
	t.Helper()
	s, err := b.Subscribe(context.Background(), topic, group, h, opts...)
	require.NoError(t, err)
	return s
}

func waitCursor(t *testing.T, b *event.Bus, topic, group string, want uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := b.Cursor(context.Background(), topic, group)
		return err == nil && c.Seq == want
	}, wait, tick, "cursor of %s/%s never reached %d", topic, group, want)
}

func cursorOf(t *testing.T, b *event.Bus, topic, group string) uint64 {
	t.Helper()
	c, err := b.Cursor(context.Background(), topic, group)
	require.NoError(t, err)
	return c.Seq
}

func testOrder(t *testing.T, s event.Store, o Options) {
	n := o.n(200)
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "orders", "g", c.handler, event.FromEarliest(), event.WithMaxInFlight(1))
	pubN(t, b, "orders", n)
	require.Eventually(t, func() bool { return c.len() == n }, wait, tick)
	for i, seq := range c.seqList() {
		require.Equal(t, uint64(i+1), seq, "delivery %d out of order", i)
	}
	waitCursor(t, b, "orders", "g", uint64(n))
}

func testIdempotentPublish(t *testing.T, s event.Store) {
	b := newBus(t, s)
	ctx := context.Background()
	r1, err := b.Publish(ctx, "t", []byte(`1`), event.WithID("fixed"))
	require.NoError(t, err)
	r2, err := b.Publish(ctx, "t", []byte(`2`), event.WithID("fixed"))
	require.NoError(t, err)
	assert.Equal(t, r1.Seq, r2.Seq)
	assert.JSONEq(t, `1`, string(r2.Payload), "the stored record is returned")
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), head)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest())
	waitCursor(t, b, "t", "g", 1)
	assert.Equal(t, 1, c.len())
}

func testStartPositions(t *testing.T, s event.Store) {
	b := newBus(t, s)
	ctx := context.Background()
	var recs []event.Record
	for i, ts := range []int64{1000, 2000, 2000, 3000, 4000} {
		r, err := b.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithTS(ts))
		require.NoError(t, err)
		recs = append(recs, r)
	}
	tests := []struct {
		name  string
		opt   event.SubscribeOption
		first uint64 // 0: nothing of the existing records
	}{
		{"latest", event.FromLatest(), 0},
		{"earliest", event.FromEarliest(), 1},
		{"seq", event.FromSeq(3), 3},
		{"ts", event.FromTS(2000), 2},
		{"tsBetween", event.FromTS(2500), 4},
		{"tsAfterAll", event.FromTS(9999), 0},
		{"afterId", event.AfterID(recs[1].ID), 3},
	}
	cols := make([]*collector, len(tests))
	for i, tc := range tests {
		cols[i] = newCollector()
		subscribe(t, b, "t", "g-"+tc.name, cols[i].handler, tc.opt)
	}
	last, err := b.Publish(ctx, "t", []byte(`"new"`))
	require.NoError(t, err)
	for i, tc := range tests {
		require.Eventually(t, func() bool {
			for _, d := range cols[i].snapshot() {
				if d.Seq == last.Seq {
					return true
				}
			}
			return false
		}, wait, tick, tc.name)
		seqs := cols[i].seqList()
		want := []uint64{}
		if tc.first > 0 {
			for s := tc.first; s <= 5; s++ {
				want = append(want, s)
			}
		}
		want = append(want, last.Seq)
		assert.ElementsMatch(t, want, seqs, tc.name)
	}

	_, err = b.Subscribe(ctx, "t", "g-bad", cols[0].handler, event.AfterID("no-such-id"))
	assert.ErrorIs(t, err, event.ErrInvalid)
	assert.ErrorContains(t, err, "afterId")
	// A group's start position is kept with it: a later subscription
	// asking for another is refused by name, one asking for none resumes
	// the group where it is.
	c := newCollector()
	_, err = b.Subscribe(ctx, "t", "g-earliest", c.handler, event.FromSeq(1))
	var ce *event.GroupConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []event.Conflict{{Field: "from", Stored: "earliest", Asked: "seq:1"}}, ce.Conflicts)
	sub := subscribe(t, b, "t", "g-earliest", c.handler)
	defer sub.Close()
	n, err := b.Publish(ctx, "t", []byte(`"after"`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cols[1].distinct()+c.distinct() >= 7 }, wait, tick)
	for _, d := range c.snapshot() {
		assert.Equal(t, n.Seq, d.Seq, "a resumed group gets only new records")
	}
}

func testRestart(t *testing.T, s event.Store) {
	ctx := context.Background()
	b1 := newBus(t, s)
	pubN(t, b1, "t", 100)
	seen := make(map[uint64]bool)
	var mu sync.Mutex
	var acked atomic.Int32
	sub := subscribe(t, b1, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		if acked.Load() >= 50 {
			return assert.AnError // leave the rest unsettled
		}
		mu.Lock()
		seen[d.Seq] = true
		mu.Unlock()
		acked.Add(1)
		return nil
	}, event.FromEarliest(), event.WithMaxInFlight(1), event.WithBackoff(time.Hour, time.Hour))
	require.Eventually(t, func() bool { return acked.Load() == 50 }, wait, tick)
	require.NoError(t, sub.Close())
	require.NoError(t, b1.Close(ctx))

	b2 := newBus(t, s)
	c := newCollector()
	subscribe(t, b2, "t", "g", c.handler, event.FromLatest())
	pubN(t, b2, "t", 10)
	waitCursor(t, b2, "t", "g", 110)
	mu.Lock()
	defer mu.Unlock()
	for _, seq := range c.seqList() {
		seen[seq] = true
	}
	for seq := uint64(1); seq <= 110; seq++ {
		assert.True(t, seen[seq], "seq %d lost across the restart", seq)
	}
}

func testTwoGroups(t *testing.T, s event.Store, o Options) {
	n := o.n(300)
	b := newBus(t, s)
	a, c := newCollector(), newCollector()
	subscribe(t, b, "t", "a", a.handler, event.FromEarliest())
	subscribe(t, b, "t", "c", c.handler, event.FromEarliest())
	pubN(t, b, "t", n)
	require.Eventually(t, func() bool { return a.len() == n && c.len() == n }, wait, tick)
	assert.Equal(t, n, a.distinct())
	assert.Equal(t, n, c.distinct())
}

type skipObserver struct {
	event.NopObserver
	skipped atomic.Uint64
}

func (o *skipObserver) Skipped(topic, group string, n uint64) { o.skipped.Add(n) }

func testBehindRetention(t *testing.T, s event.Store) {
	pr, ok := s.(event.Pruner)
	if !ok {
		t.Skip("store does not implement Pruner")
	}
	ctx := context.Background()
	obs := &skipObserver{}
	b := newBus(t, s, func(c *event.Config) { c.Observer = obs })
	// The group exists, at seq 0, but reads nothing while it is away.
	sub := subscribe(t, b, "t", "g", nopHandler, event.FromEarliest())
	require.NoError(t, sub.Close())
	pubN(t, b, "t", 10, event.WithTS(1000))
	_, err := pr.Prune(ctx, "t", 2000, false)
	require.NoError(t, err)
	pubN(t, b, "t", 3)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler)
	waitCursor(t, b, "t", "g", 13)
	assert.Equal(t, []uint64{11, 12, 13}, c.seqList())
	assert.Equal(t, uint64(10), obs.skipped.Load(), "the group is told how many it missed")
}

func nopHandler(context.Context, *event.Delivery) error { return nil }
