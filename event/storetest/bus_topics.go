package storetest

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// ackAllBut is a handler that acks every delivery except those of the ids
// in keep (a nack each time), counting deliveries by id.
type ackAllBut struct {
	mu   sync.Mutex
	keep map[string]bool
	got  map[string]int
}

func newAckAllBut(keep ...string) *ackAllBut {
	a := &ackAllBut{keep: map[string]bool{}, got: map[string]int{}}
	for _, id := range keep {
		a.keep[id] = true
	}
	return a
}

func (a *ackAllBut) handler(_ context.Context, d *event.Delivery) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got[d.ID]++
	if a.keep[d.ID] {
		return errKeep
	}
	return nil
}

func (a *ackAllBut) count(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[id]
}

func (a *ackAllBut) ids() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.got))
	for k, v := range a.got {
		out[k] = v
	}
	return out
}

type keepErr struct{}

func (keepErr) Error() string { return "storetest: kept unacked" }

var errKeep error = keepErr{}

// testPartitionsFromStore is the newcomer's report: a topic published and
// consumed under 8 partitions, then consumed by a process configured with
// 2. The stored count wins: the 2 records left unsettled are delivered,
// and no settled record is delivered again.
func testPartitionsFromStore(t *testing.T, s event.Store) {
	if _, ok := s.(event.TopicStore); !ok {
		t.Skip("store does not implement TopicStore")
	}
	ctx := context.Background()
	a := newBus(t, s, func(c *event.Config) { c.Partitions = 8 })
	var ids []string
	for i := range 16 {
		r, err := a.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithKey("k"+strconv.Itoa(i)))
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	left := []string{ids[2], ids[9]}
	h := newAckAllBut(left...)
	sub := subscribe(t, a, "t", "g", h.handler, event.FromEarliest(), event.WithMaxAttempts(100))
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if h.count(id) == 0 {
				return false
			}
		}
		return true
	}, wait, tick)
	require.NoError(t, sub.Close())

	b := newBus(t, s, func(c *event.Config) { c.Partitions = 2 })
	n, err := b.Partitions(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, 8, n, "the stored count, not the configured one")
	h2 := newAckAllBut()
	subscribe(t, b, "t", "g", h2.handler)
	r, err := b.Publish(ctx, "t", []byte(`"later"`), event.WithKey("k3"))
	require.NoError(t, err)
	assert.Equal(t, event.PartitionOf("k3", r.ID, 8), r.Partition, "a process configured with 2 publishes with the stored 8")
	require.Eventually(t, func() bool {
		return h2.count(left[0]) > 0 && h2.count(left[1]) > 0 && h2.count(r.ID) > 0
	}, wait, tick, "the records left unsettled under 8 partitions reach the member configured with 2")
	waitCursor(t, b, "t", "g", r.Seq)
	for id, n := range h2.ids() {
		assert.True(t, id == left[0] || id == left[1] || id == r.ID, "settled record %s delivered again (%d times)", id, n)
	}

	strict := newBus(t, s, func(c *event.Config) { c.Partitions, c.StrictPartitions = 2, true })
	_, err = strict.Publish(ctx, "t", []byte(`1`))
	assert.ErrorIs(t, err, event.ErrInvalid, "StrictPartitions refuses a topic with another count")
	assert.ErrorContains(t, err, "8 partitions")
}

// testAddPartitions adds partitions while two members of a group consume:
// nothing is skipped, nothing settled is delivered again, and both members
// take the new partitions.
func testAddPartitions(t *testing.T, s event.Store, o Options) {
	if _, ok := s.(event.TopicStore); !ok {
		t.Skip("store does not implement TopicStore")
	}
	ctx := context.Background()
	n := o.n(100)
	a := newBus(t, s, func(c *event.Config) { c.Partitions, c.MemberID = 2, "a" })
	b := newBus(t, s, func(c *event.Config) { c.Partitions, c.MemberID = 2, "b" })
	h := newAckAllBut()
	subscribe(t, a, "t", "g", h.handler, event.FromEarliest())
	subscribe(t, b, "t", "g", h.handler, event.FromEarliest())
	var ids []string
	pub := func(from, to int) {
		for i := from; i < to; i++ {
			r, err := a.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithKey("k"+strconv.Itoa(i)))
			require.NoError(t, err)
			ids = append(ids, r.ID)
		}
	}
	pub(0, n/2)
	require.NoError(t, a.AddPartitions(ctx, "t", 6))
	err := b.AddPartitions(ctx, "t", 3)
	assert.ErrorIs(t, err, event.ErrInvalid, "partitions are never removed")
	pub(n/2, n)
	parts := map[int]bool{}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if h.count(id) == 0 {
				return false
			}
		}
		return true
	}, wait, tick, "every record is delivered across the change")
	for id, c := range h.ids() {
		assert.Equal(t, 1, c, "record %s delivered %d times", id, c)
	}
	for _, st := range append(a.Stats(), b.Stats()...) {
		for _, p := range st.Partitions {
			parts[p] = true
		}
	}
	for p := 2; p < 6; p++ {
		assert.True(t, parts[p], "no member took new partition %d", p)
	}
	nb, err := b.Partitions(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, 6, nb, "the other Bus learned the count")
}
