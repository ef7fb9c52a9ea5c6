package storetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// partitionCounters is a stateful consumer's store: a count of events per
// partition, loaded by the member that is assigned a partition and flushed
// when it is revoked. owner says which member holds each partition as the
// hooks see it; a second owner is an overlap.
type partitionCounters struct {
	mu       sync.Mutex
	stored   map[int]int
	owner    map[int]string
	overlaps []string
	assigns  atomic.Int32
}

// member is one member's view: the counters of the partitions it holds.
type member struct {
	name string
	pc   *partitionCounters
	mu   sync.Mutex
	held map[int]int
}

func (m *member) assign(_ context.Context, p int) {
	m.pc.mu.Lock()
	if o := m.pc.owner[p]; o != "" {
		m.pc.overlaps = append(m.pc.overlaps, fmt.Sprintf("partition %d assigned to %s while %s holds it", p, m.name, o))
	}
	m.pc.owner[p] = m.name
	n := m.pc.stored[p]
	m.pc.mu.Unlock()
	m.pc.assigns.Add(1)
	m.mu.Lock()
	m.held[p] = n
	m.mu.Unlock()
}

func (m *member) revoke(_ context.Context, p int) {
	m.mu.Lock()
	n, ok := m.held[p]
	delete(m.held, p)
	m.mu.Unlock()
	m.pc.mu.Lock()
	defer m.pc.mu.Unlock()
	if !ok || m.pc.owner[p] != m.name {
		m.pc.overlaps = append(m.pc.overlaps, fmt.Sprintf("partition %d revoked from %s, held by %q", p, m.name, m.pc.owner[p]))
		return
	}
	m.pc.stored[p] = n
	delete(m.pc.owner, p)
}

func (m *member) handle(_ context.Context, d *event.Delivery) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.held[d.Partition]; !ok {
		return fmt.Errorf("storetest: %s got partition %d without holding it", m.name, d.Partition)
	}
	m.held[d.Partition]++
	return nil
}

// testRebalanceHooks: three members count events per partition in their
// rebalance hooks' state; one leaves and one joins while events are
// published. Each partition is held by one member at a time as the hooks
// see it, and at the end each stored counter equals the events of its
// partition.
func testRebalanceHooks(t *testing.T, s event.Store, o Options) {
	if _, ok := s.(event.LeaseStore); !ok {
		t.Skip("store does not implement LeaseStore")
	}
	// Leases long enough that none lapses on a slow server: a lapsed
	// lease is a stalled member, whose hooks may overlap the next owner's
	// (testStalledMember).
	bs := make([]*event.Bus, 4)
	for i := range bs {
		bs[i] = newBus(t, s, func(c *event.Config) {
			c.Partitions, c.LeaseTTL, c.MemberID = 6, 6*time.Second, "m"+strconv.Itoa(i)
		})
	}
	pc := &partitionCounters{stored: map[int]int{}, owner: map[int]string{}}
	subs := make([]*event.Subscription, len(bs))
	join := func(i int) {
		m := &member{name: "m" + strconv.Itoa(i), pc: pc, held: map[int]int{}}
		subs[i] = subscribe(t, bs[i], "t", "g", m.handle, event.FromEarliest(),
			event.WithRebalanceHooks(m.assign, m.revoke))
	}
	for i := range 3 {
		join(i)
	}
	// Publish once each member holds its share. The first member up takes
	// every partition until the others' heartbeats reach it (a renewal
	// later), and a member's first renewal runs in a goroutine of its own:
	// on a loaded machine a fast store took every event, and m0 left,
	// before m0 or m2 held any partition, and nothing moved.
	for i := range 3 {
		require.Eventually(t, func() bool {
			st := bs[i].Stats()
			return len(st) == 1 && len(st[0].Partitions) == 2
		}, wait, tick, "m%d holds its share of the partitions", i)
	}
	// A publisher keeps events coming while a member leaves and another
	// joins.
	want := map[int]int{}
	n := o.n(600) // a member leaves after a quarter, one joins after half
	published := make(chan int, n)
	pubErr := make(chan error, 1)
	go func() {
		defer close(published)
		for i := range n {
			rec, err := bs[0].Publish(context.Background(), "t", []byte(strconv.Itoa(i)), event.WithKey("k"+strconv.Itoa(i%17)))
			if err != nil {
				pubErr <- err
				return
			}
			published <- rec.Partition
		}
	}()
	seen := 0
	for p := range published {
		want[p]++
		seen++
		switch {
		case seen == n/4:
			require.NoError(t, subs[0].Close()) // leaves under load
		case seen == n/2:
			join(3) // joins under load
			require.Eventually(t, func() bool {
				st := bs[3].Stats()
				return len(st) == 1 && len(st[0].Partitions) == 2
			}, wait, tick, "the new member takes its share")
		}
	}
	select {
	case err := <-pubErr:
		require.NoError(t, err)
	default:
	}
	require.Equal(t, n, seen)
	waitCursor(t, bs[1], "t", "g", uint64(n))
	for _, i := range []int{1, 2, 3} {
		require.NoError(t, subs[i].Close())
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	assert.Empty(t, pc.overlaps)
	assert.Empty(t, pc.owner, "every partition was revoked at Close")
	assert.Equal(t, want, pc.stored, "per-partition counters equal the events of each partition")
	assert.Greater(t, int(pc.assigns.Load()), 6, "partitions moved between members")
}
