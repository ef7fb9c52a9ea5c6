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

func testSharedGroup(t *testing.T, s event.Store, o Options) {
	// A partition is served by one subscription at a time: four
	// subscriptions share the work of eight partitions.
	n := o.n(1000)
	b := newBus(t, s, func(c *event.Config) { c.Partitions = 8 })
	all, cols := subscribeCollecting(t, []*event.Bus{b, b, b, b}, 8)
	pubN(t, b, "t", n)
	waitCursor(t, b, "t", "g", uint64(n))
	assert.Equal(t, n, all.len(), "each record delivered once")
	assert.Equal(t, n, all.distinct())
	for i, c := range cols {
		assert.Positive(t, c.len(), "subscriber %d got no work", i)
	}
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

// waitShares waits until each of the 3 members of partitionedBuses holds
// its 2 partitions of the group's 6.
func waitShares(t *testing.T, bs []*event.Bus) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, b := range bs {
			st := b.Stats()
			if len(st) != 1 || len(st[0].Partitions) != 2 {
				return false
			}
		}
		return true
	}, wait, tick, "6 partitions split 2/2/2")
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

func testSharedPartitions(t *testing.T, s event.Store, o Options) {
	n := o.n(600) // 30 keys: 4 records a key at least
	bs := partitionedBuses(t, s, 3)
	all, cols := subscribeCollecting(t, bs, 1)
	waitShares(t, bs)
	publishKeyed(t, bs[0], "t", n, 30)
	require.Eventually(t, func() bool { return all.distinct() == n }, wait, tick)
	assert.Equal(t, n, all.len(), "each record in flight at one member at a time")
	for i, c := range cols {
		assert.Positive(t, c.len(), "member %d got no work", i)
		checkKeyOrder(t, c.snapshot())
	}
}

func testRebalance(t *testing.T, s event.Store, o Options) {
	n := o.n(300) // 12 keys: 5 records a key at least, before and after
	bs := partitionedBuses(t, s, 3)
	all, cols := subscribeCollecting(t, bs, 1)
	publishKeyed(t, bs[0], "t", n, 12)
	require.Eventually(t, func() bool { return all.distinct() == n }, wait, tick)
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
	publishKeyed(t, bs[1], "t", n, 12)
	require.Eventually(t, func() bool { return all.distinct() == 2*n }, wait, tick)
	waitCursor(t, bs[0], "t", "g", uint64(2*n))
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

func (s *stallableLeases) AcquireLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, bool, error) {
	if s.stalled.Load() {
		return 0, false, errStalled
	}
	return s.LeaseStore.AcquireLease(ctx, p, member, ttl)
}

// stallableRenewer is a stallableLeases over a store that renews
// membership and leases in one call.
type stallableRenewer struct {
	*stallableLeases
	r event.LeaseRenewer
}

func (s stallableRenewer) Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) ([]string, []event.LeaseGrant, error) {
	if s.stalled.Load() {
		return nil, nil, errStalled
	}
	return s.r.Renew(ctx, topic, group, member, ttl, parts)
}

func testStalledMember(t *testing.T, s event.Store) {
	ls, ok := s.(event.LeaseStore)
	if !ok {
		t.Skip("store does not implement LeaseStore")
	}
	const ttl = time.Second
	stall := &stallableLeases{LeaseStore: ls}
	var leases event.LeaseStore = stall
	if r, ok := ls.(event.LeaseRenewer); ok {
		leases = stallableRenewer{stall, r}
	}
	stuck := newBus(t, s, func(c *event.Config) {
		c.Partitions, c.LeaseTTL, c.MemberID, c.Leases = 2, ttl, "stuck", leases
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
	var revoked atomic.Int32
	subscribe(t, stuck, "t", "g", handler("stuck"), event.FromEarliest(),
		event.WithRebalanceHooks(nil, func(context.Context, int) { revoked.Add(1) }))
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
	for seq, who := range owner {
		assert.Equal(t, []string{"live"}, who, "seq %d delivered by a member without a lease", seq)
	}
	mu.Unlock()
	// The stalled member runs its revoke hook as soon as it notices it
	// lost the partition: at the latest when the store answers again.
	stall.stalled.Store(false)
	require.Eventually(t, func() bool { return revoked.Load() >= 1 }, wait, tick, "the stalled member's revoke hook ran")
}

// subscribeCollecting subscribes one subscription of group g on topic t in
// each of bs (a Bus may appear more than once), from earliest with the
// given MaxInFlight, and collects what each gets and what all get.
func subscribeCollecting(t *testing.T, bs []*event.Bus, maxInFlight int) (all *collector, cols []*collector) {
	t.Helper()
	all = newCollector()
	cols = make([]*collector, len(bs))
	for i, b := range bs {
		col := newCollector()
		cols[i] = col
		subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
			col.add(d)
			all.add(d)
			return nil
		}, event.FromEarliest(), event.WithMaxInFlight(maxInFlight))
	}
	return all, cols
}
