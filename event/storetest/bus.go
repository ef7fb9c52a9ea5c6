package storetest

import (
	"context"
	"errors"
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
func RunBus(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s event.Store)
	}{
		{"OrderBySeq", testOrder},
		{"IdempotentPublish", testIdempotentPublish},
		{"StartPositions", testStartPositions},
		{"OutOfOrderAcksHoldTheCursor", testOutOfOrderAcks},
		{"NackRedelivers", testNackRedelivers},
		{"ExpiredLeaseRedelivers", testLeaseExpiry},
		{"ModAckExtendsTheLease", testModAck},
		{"StaleAckIsRefused", testStaleAck},
		{"DeadLetterAfterMaxAttempts", testDeadLetter},
		{"RestartResumesFromCursor", testRestart},
		{"GroupsAreIndependent", testTwoGroups},
		{"SubscribersShareTheGroup", testSharedGroup},
		{"MaxInFlightIsFlowControl", testMaxInFlight},
		{"Filter", testFilter},
		{"PauseResume", testPauseResume},
		{"CloseWithDeliveriesInFlight", testCloseInFlight},
		{"UnsubscribeGivesBackInFlight", testUnsubscribeGivesBack},
		{"BusesShareGroupPartitions", testSharedPartitions},
		{"MemberDeathRebalances", testRebalance},
		{"StalledMemberLosesPartitions", testStalledMember},
		{"BehindRetentionIsReported", testBehindRetention},
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

func testOrder(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "orders", "g", c.handler, event.FromEarliest(), event.WithMaxInFlight(1))
	pubN(t, b, "orders", 200)
	require.Eventually(t, func() bool { return c.len() == 200 }, wait, tick)
	for i, seq := range c.seqList() {
		require.Equal(t, uint64(i+1), seq, "delivery %d out of order", i)
	}
	waitCursor(t, b, "orders", "g", 200)
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
	// A group with a committed cursor ignores its start position.
	c := newCollector()
	sub := subscribe(t, b, "t", "g-earliest", c.handler, event.FromSeq(1))
	defer sub.Close()
	n, err := b.Publish(ctx, "t", []byte(`"after"`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cols[1].distinct()+c.distinct() >= 7 }, wait, tick)
	for _, d := range c.snapshot() {
		assert.Equal(t, n.Seq, d.Seq, "a resumed group gets only new records")
	}
}

func testOutOfOrderAcks(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(), event.WithAckTimeout(time.Minute))
	pubN(t, b, "t", 5)
	require.Eventually(t, func() bool { return c.len() == 5 }, wait, tick)
	ds := c.snapshot()
	ctx := context.Background()
	for _, d := range ds[1:] {
		require.NoError(t, d.Ack(ctx))
	}
	// Commits run every few ms; give them a chance to (wrongly) move.
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, uint64(0), cursorOf(t, b, "t", "g"), "acks after an un-acked record must not move the cursor")
	require.NoError(t, ds[0].Ack(ctx))
	waitCursor(t, b, "t", "g", 5)
	assert.ErrorIs(t, ds[0].Ack(ctx), event.ErrNotInFlight, "a second ack is refused")
}

func testNackRedelivers(t *testing.T, s event.Store) {
	b := newBus(t, s)
	var calls atomic.Int32
	c := newCollector()
	subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		c.add(d)
		if calls.Add(1) == 1 {
			return assert.AnError
		}
		return nil
	}, event.FromEarliest(), event.WithBackoff(10*time.Millisecond, 10*time.Millisecond))
	pubN(t, b, "t", 1)
	require.Eventually(t, func() bool { return c.len() == 2 }, wait, tick)
	ds := c.snapshot()
	assert.Equal(t, 1, ds[0].Attempt)
	assert.Equal(t, 2, ds[1].Attempt)
	assert.Equal(t, ds[0].ID, ds[1].ID)
	waitCursor(t, b, "t", "g", 1)
}

func testLeaseExpiry(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(),
		event.WithAckTimeout(200*time.Millisecond), event.WithBackoff(time.Millisecond, time.Millisecond))
	pubN(t, b, "t", 1)
	require.Eventually(t, func() bool { return c.len() >= 2 }, wait, tick)
	ds := c.snapshot()
	assert.Equal(t, 2, ds[1].Attempt)
	assert.Equal(t, uint64(0), cursorOf(t, b, "t", "g"))
	ackLatest(t, c)
	waitCursor(t, b, "t", "g", 1)
}

// ackLatest acks the collector's latest delivery. On a slow machine that
// one's lease may end too before the ack lands; then the next one is acked.
func ackLatest(t *testing.T, c *collector) {
	t.Helper()
	require.Eventually(t, func() bool {
		ds := c.snapshot()
		return ds[len(ds)-1].Ack(context.Background()) == nil
	}, wait, tick)
}

func testModAck(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(),
		event.WithAckTimeout(150*time.Millisecond), event.WithBackoff(time.Millisecond, time.Millisecond))
	pubN(t, b, "t", 1)
	require.Eventually(t, func() bool { return c.len() == 1 }, wait, tick)
	d := c.snapshot()[0]
	ctx := context.Background()
	// Keep extending past several original deadlines.
	until := time.Now().Add(600 * time.Millisecond)
	for time.Now().Before(until) {
		require.NoError(t, d.ModAck(ctx, 150*time.Millisecond))
		time.Sleep(30 * time.Millisecond)
	}
	assert.Equal(t, 1, c.len(), "a lease kept alive by ModAck is not redelivered")
	require.NoError(t, d.Ack(ctx))
	waitCursor(t, b, "t", "g", 1)
	assert.ErrorIs(t, d.ModAck(ctx, time.Second), event.ErrNotInFlight)
}

func testStaleAck(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(),
		event.WithAckTimeout(80*time.Millisecond), event.WithBackoff(time.Millisecond, time.Millisecond))
	pubN(t, b, "t", 1)
	require.Eventually(t, func() bool { return c.len() >= 2 }, wait, tick)
	ds := c.snapshot()
	ctx := context.Background()
	err := ds[0].Ack(ctx)
	assert.ErrorIs(t, err, event.ErrStaleAck, "an ack of an expired attempt is refused")
	assert.ErrorIs(t, ds[0].Nack(ctx, "late"), event.ErrStaleAck)
	assert.Equal(t, uint64(0), cursorOf(t, b, "t", "g"), "a stale ack settles nothing")
	require.Eventually(t, func() bool {
		last := c.snapshot()[c.len()-1]
		return b.Ack(ctx, "t", "g", last.ID, last.Attempt) == nil
	}, wait, tick)
	waitCursor(t, b, "t", "g", 1)
}

func testDeadLetter(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		c.add(d)
		if string(d.Payload) == `{"i":1}` {
			return assert.AnError
		}
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(3), event.WithBackoff(time.Millisecond, 5*time.Millisecond))
	dl := newCollector()
	subscribe(t, b, "t.dlq", "inspect", dl.handler, event.FromEarliest())
	recs := pubN(t, b, "t", 3)
	waitCursor(t, b, "t", "g", 3)
	require.Eventually(t, func() bool { return dl.len() == 1 }, wait, tick)
	d := dl.snapshot()[0]
	assert.Equal(t, recs[1].ID, d.Headers[event.HeaderDLQID])
	assert.Equal(t, "3", d.Headers[event.HeaderDLQAttempt])
	assert.Equal(t, "g", d.Headers[event.HeaderDLQGroup])
	assert.Equal(t, "t", d.Headers[event.HeaderDLQTopic])
	assert.Contains(t, d.Headers[event.HeaderDLQReason], assert.AnError.Error())
	assert.JSONEq(t, `{"i":1}`, string(d.Payload))
	attempts := 0
	for _, x := range c.snapshot() {
		if x.ID == recs[1].ID {
			attempts++
		}
	}
	assert.Equal(t, 3, attempts)
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

func testTwoGroups(t *testing.T, s event.Store) {
	b := newBus(t, s)
	a, c := newCollector(), newCollector()
	subscribe(t, b, "t", "a", a.handler, event.FromEarliest())
	subscribe(t, b, "t", "c", c.handler, event.FromEarliest())
	pubN(t, b, "t", 300)
	require.Eventually(t, func() bool { return a.len() == 300 && c.len() == 300 }, wait, tick)
	assert.Equal(t, 300, a.distinct())
	assert.Equal(t, 300, c.distinct())
}

func testSharedGroup(t *testing.T, s event.Store) {
	b := newBus(t, s)
	cols := make([]*collector, 4)
	all := newCollector()
	for i := range cols {
		cols[i] = newCollector()
		col := cols[i]
		subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
			col.add(d)
			all.add(d)
			return nil
		}, event.FromEarliest(), event.WithMaxInFlight(8))
	}
	pubN(t, b, "t", 1000)
	waitCursor(t, b, "t", "g", 1000)
	assert.Equal(t, 1000, all.len(), "each record delivered once")
	assert.Equal(t, 1000, all.distinct())
	for i, c := range cols {
		assert.Positive(t, c.len(), "subscriber %d got no work", i)
	}
}

func testMaxInFlight(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck(), event.WithMaxInFlight(3))
	pubN(t, b, "t", 10)
	require.Eventually(t, func() bool { return c.len() == 3 }, wait, tick)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, 3, c.len(), "no more than MaxInFlight outstanding")
	ctx := context.Background()
	for i := 0; c.len() < 10 || i < c.len(); i++ {
		require.Eventually(t, func() bool { return c.len() > i }, wait, tick)
		require.NoError(t, c.snapshot()[i].Ack(ctx))
	}
	waitCursor(t, b, "t", "g", 10)
	assert.Equal(t, 10, c.distinct(), "flow control waits, never drops")
}

func testFilter(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	subscribe(t, b, "t", "g", c.handler, event.FromEarliest(), event.WithFilter(func(r *event.Record) bool {
		return r.Seq%2 == 0
	}))
	pubN(t, b, "t", 20)
	waitCursor(t, b, "t", "g", 20)
	assert.Equal(t, 10, c.len())
	for _, seq := range c.seqList() {
		assert.Zero(t, seq%2)
	}
}

func testPauseResume(t *testing.T, s event.Store) {
	b := newBus(t, s)
	c := newCollector()
	sub := subscribe(t, b, "t", "g", c.handler, event.FromEarliest())
	sub.Pause()
	pubN(t, b, "t", 5)
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, c.len(), "nothing is delivered while paused")
	sub.Resume()
	waitCursor(t, b, "t", "g", 5)
	assert.Equal(t, 5, c.len())
}

func testCloseInFlight(t *testing.T, s event.Store) {
	ctx := context.Background()
	b1 := newBus(t, s)
	c := newCollector()
	subscribe(t, b1, "t", "g", c.handler, event.FromEarliest(), event.WithManualAck())
	pubN(t, b1, "t", 10)
	require.Eventually(t, func() bool { return c.len() == 10 }, wait, tick)
	for _, d := range c.snapshot()[:4] {
		require.NoError(t, d.Ack(ctx))
	}
	require.NoError(t, b1.Close(ctx))
	assert.Equal(t, uint64(4), cursorOf(t, b1, "t", "g"), "Close commits the settled prefix")
	_, err := b1.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err, "a closed bus still publishes")
	_, err = b1.Subscribe(ctx, "t", "g", c.handler)
	assert.ErrorIs(t, err, event.ErrClosed)

	b2 := newBus(t, s)
	c2 := newCollector()
	subscribe(t, b2, "t", "g", c2.handler)
	waitCursor(t, b2, "t", "g", 11)
	assert.Equal(t, []uint64{5, 6, 7, 8, 9, 10, 11}, c2.seqList())
}

func testUnsubscribeGivesBack(t *testing.T, s event.Store) {
	b := newBus(t, s)
	slow, fast := newCollector(), newCollector()
	sub := subscribe(t, b, "t", "g", slow.handler, event.FromEarliest(), event.WithManualAck(),
		event.WithAckTimeout(time.Hour), event.WithMaxInFlight(5))
	pubN(t, b, "t", 5)
	require.Eventually(t, func() bool { return slow.len() == 5 }, wait, tick)
	subscribe(t, b, "t", "g", fast.handler)
	require.NoError(t, sub.Close())
	require.Eventually(t, func() bool { return fast.len() == 5 }, wait, tick, "given-back deliveries go to the other subscriber at once")
	for _, d := range fast.snapshot() {
		assert.Equal(t, 2, d.Attempt)
	}
	waitCursor(t, b, "t", "g", 5)
}

// partitionedBuses returns n buses over s that share groups over 6
// partitions with 2s leases.
func partitionedBuses(t *testing.T, s event.Store, n int) []*event.Bus {
	bs := make([]*event.Bus, n)
	for i := range bs {
		bs[i] = newBus(t, s, func(c *event.Config) {
			c.Partitions = 6
			c.LeaseTTL = 2 * time.Second // renewals every 667ms: room for a slow server
			c.MemberID = "m" + strconv.Itoa(i)
		})
	}
	return bs
}

func publishKeyed(t *testing.T, b *event.Bus, topic string, n, keys int) {
	t.Helper()
	for i := range n {
		_, err := b.Publish(context.Background(), topic, []byte(strconv.Itoa(i)), event.WithKey("k"+strconv.Itoa(i%keys)))
		require.NoError(t, err)
	}
}

// checkKeyOrder asserts that one member got each key's records in seq
// order. A record may come again (at least once: a partition taken over
// restarts from its committed cursor), so only first deliveries count.
func checkKeyOrder(t *testing.T, ds []*event.Delivery) {
	t.Helper()
	last := make(map[string]uint64)
	seen := make(map[uint64]bool)
	for _, d := range ds {
		if d.Attempt > 1 || seen[d.Seq] {
			continue
		}
		seen[d.Seq] = true
		assert.Greater(t, d.Seq, last[d.Key], "key %s out of order", d.Key)
		last[d.Key] = d.Seq
	}
}

func testSharedPartitions(t *testing.T, s event.Store) {
	bs := partitionedBuses(t, s, 3)
	all := newCollector()
	cols := make([]*collector, len(bs))
	for i, b := range bs {
		cols[i] = newCollector()
		col := cols[i]
		subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
			col.add(d)
			all.add(d)
			return nil
		}, event.FromEarliest(), event.WithMaxInFlight(1))
	}
	// Wait until every member holds its share.
	require.Eventually(t, func() bool {
		for _, b := range bs {
			st := b.Stats()
			if len(st) != 1 || len(st[0].Partitions) != 2 {
				return false
			}
		}
		return true
	}, wait, tick, "6 partitions split 2/2/2")
	publishKeyed(t, bs[0], "t", 600, 30)
	require.Eventually(t, func() bool { return all.distinct() == 600 }, wait, tick)
	assert.Equal(t, 600, all.len(), "each record in flight at one member at a time")
	for i, c := range cols {
		assert.Positive(t, c.len(), "member %d got no work", i)
		checkKeyOrder(t, c.snapshot())
	}
}

func testRebalance(t *testing.T, s event.Store) {
	bs := partitionedBuses(t, s, 3)
	all := newCollector()
	cols := make([]*collector, len(bs))
	for i, b := range bs {
		cols[i] = newCollector()
		col := cols[i]
		subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
			all.add(d)
			col.add(d)
			return nil
		}, event.FromEarliest(), event.WithMaxInFlight(1))
	}
	publishKeyed(t, bs[0], "t", 300, 12)
	require.Eventually(t, func() bool { return all.distinct() == 300 }, wait, tick)
	// One member leaves: the two others take its partitions.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, bs[2].Close(ctx))
	require.Eventually(t, func() bool {
		n := 0
		for _, b := range bs[:2] {
			for _, st := range b.Stats() {
				n += len(st.Partitions)
			}
		}
		return n == 6
	}, wait, tick, "the remaining members own all partitions")
	publishKeyed(t, bs[1], "t", 300, 12)
	require.Eventually(t, func() bool { return all.distinct() == 600 }, wait, tick)
	waitCursor(t, bs[0], "t", "g", 600)
	for _, c := range cols {
		checkKeyOrder(t, c.snapshot())
	}
}

// stallableLeases fails every call once stalled, as a member that lost its
// connection to the store would see.
type stallableLeases struct {
	event.LeaseStore
	stalled atomic.Bool
}

var errStalled = errors.New("storetest: member stalled")

func (s *stallableLeases) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	if s.stalled.Load() {
		return nil, errStalled
	}
	return s.LeaseStore.Heartbeat(ctx, topic, group, member, ttl)
}

func (s *stallableLeases) AcquireLease(ctx context.Context, topic, group string, partition int, member string, ttl time.Duration) (bool, error) {
	if s.stalled.Load() {
		return false, errStalled
	}
	return s.LeaseStore.AcquireLease(ctx, topic, group, partition, member, ttl)
}

func testStalledMember(t *testing.T, s event.Store) {
	ls, ok := s.(event.LeaseStore)
	if !ok {
		t.Skip("store does not implement LeaseStore")
	}
	const ttl = time.Second
	stall := &stallableLeases{LeaseStore: ls}
	stuck := newBus(t, s, func(c *event.Config) {
		c.Partitions, c.LeaseTTL, c.MemberID, c.Leases = 2, ttl, "stuck", stall
	})
	live := newBus(t, s, func(c *event.Config) {
		c.Partitions, c.LeaseTTL, c.MemberID = 2, ttl, "live"
	})
	var mu sync.Mutex
	owner := make(map[uint64][]string)
	handler := func(name string) event.Handler {
		return func(ctx context.Context, d *event.Delivery) error {
			mu.Lock()
			owner[d.Seq] = append(owner[d.Seq], name)
			mu.Unlock()
			return nil
		}
	}
	subscribe(t, stuck, "t", "g", handler("stuck"), event.FromEarliest())
	subscribe(t, live, "t", "g", handler("live"), event.FromEarliest())
	require.Eventually(t, func() bool {
		return len(stuck.Stats()[0].Partitions) == 1 && len(live.Stats()[0].Partitions) == 1
	}, wait, tick, "two members, one partition each")

	stall.stalled.Store(true)
	// The stalled member stops delivering once its leases lapse; the live
	// one takes both partitions after they expire.
	require.Eventually(t, func() bool { return len(live.Stats()[0].Partitions) == 2 }, wait, tick)
	publishKeyed(t, live, "t", 100, 10)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(owner) == 100
	}, wait, tick)
	mu.Lock()
	defer mu.Unlock()
	for seq, who := range owner {
		assert.Equal(t, []string{"live"}, who, "seq %d delivered by a member without a lease", seq)
	}
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
