package storetest

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// The scenario of tools/oldrelease/gen.go, as the old release stored it.
const (
	oldTSBase     = 1767225600000
	oldPartitions = 8
)

// oldKeyPartitions are the partitions of the keys of "orders" among 8.
var oldKeyPartitions = map[string]int{"k0": 6, "k1": 1, "k2": 0, "k3": 3, "k4": 2, "k5": 5, "k6": 4, "k7": 7}

// oldDelivery is what a handler saw of a delivery.
type oldDelivery struct {
	seq     uint64
	id      string
	attempt int
}

// CheckPreviousRelease checks a store holding the scenario of
// tools/oldrelease/gen.go, written by the release at ccdae86 (each durable
// store commits a fixture of it in its testdata): opened with the current
// code and a Bus left at the default partition count, the topic keeps its
// 8 partitions, group g gets the two records it had not settled (and only
// those) with their attempts counted on, group dl resumes after its dead
// letter, and the records are as the old release stored them.
func CheckPreviousRelease(t *testing.T, s event.Store) {
	t.Helper()
	ctx := context.Background()
	bus, err := event.NewBus(s, event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, bus.Close(cctx))
	})

	// The partition counts are inferred from the records and cursors.
	for _, topic := range []string{"orders", "idle"} {
		n, err := bus.Partitions(ctx, topic)
		require.NoError(t, err)
		assert.Equal(t, oldPartitions, n, "partitions of %q, inferred from what the old release stored (the Bus's default is 1)", topic)
	}

	// The records are as the old release stored them.
	recs, err := s.Read(ctx, "orders", 0, 100)
	require.NoError(t, err)
	require.Len(t, recs, 16, "records of orders")
	for i, r := range recs {
		n := i + 1
		key := fmt.Sprintf("k%d", (n-1)%8)
		assert.Equal(t, uint64(n), r.Seq, "seq of record %d", n)
		assert.Equal(t, fmt.Sprintf("orders-%02d", n), r.ID, "id of seq %d", n)
		assert.Equal(t, key, r.Key, "key of seq %d", n)
		assert.Equal(t, oldKeyPartitions[key], r.Partition, "partition of seq %d", n)
		assert.Equal(t, int64(oldTSBase+n), r.TS, "ts of seq %d", n)
		assert.JSONEq(t, fmt.Sprintf(`{"n":%d}`, n), string(r.Payload), "payload of seq %d", n)
	}
	idle, err := s.Read(ctx, "idle", 0, 100)
	require.NoError(t, err)
	require.Len(t, idle, 3, "records of idle")
	for i, want := range []int{4, 7, 2} { // keys i0, i1, i2
		assert.Equal(t, fmt.Sprintf("idle-%02d", i+1), idle[i].ID)
		assert.Equal(t, want, idle[i].Partition, "partition of idle seq %d", i+1)
	}

	// Group dl settled every record, seq 5 by dead-lettering it.
	c, err := bus.Cursor(ctx, "orders", "dl")
	require.NoError(t, err, "cursor of group dl")
	assert.Equal(t, uint64(16), c.Seq, "cursor of group dl")
	assert.Len(t, c.Partitions, oldPartitions, "partitions of the cursor of group dl: %v", c.Partitions)
	dlq, err := s.Read(ctx, "orders.dlq", 0, 100)
	require.NoError(t, err)
	require.Len(t, dlq, 1, "records of orders.dlq")
	assert.Equal(t, "dl", dlq[0].Headers[event.HeaderDLQGroup], "headers of the dead letter: %v", dlq[0].Headers)
	assert.Equal(t, "orders-05", dlq[0].Headers[event.HeaderDLQID], "headers of the dead letter: %v", dlq[0].Headers)
	assert.Equal(t, "5", dlq[0].Headers[event.HeaderDLQSeq], "headers of the dead letter: %v", dlq[0].Headers)

	// Both groups resume: g gets the two records it had not settled,
	// their third attempt (two were stored); dl gets nothing old.
	got := map[string]chan oldDelivery{"g": make(chan oldDelivery, 64), "dl": make(chan oldDelivery, 64)}
	for group, ch := range got {
		_, err := bus.Subscribe(ctx, "orders", group, func(ctx context.Context, d *event.Delivery) error {
			ch <- oldDelivery{seq: d.Seq, id: d.ID, attempt: d.Attempt}
			return nil
		}, event.FromEarliest())
		require.NoError(t, err, "subscribe group %s", group)
	}
	receive := func(group, what string) oldDelivery {
		t.Helper()
		select {
		case d := <-got[group]:
			return d
		case <-time.After(10 * time.Second):
			t.Fatalf("group %s: no delivery within 10 s, waiting for %s", group, what)
			return oldDelivery{}
		}
	}
	unsettled := map[uint64]bool{2: true, 9: true}
	for len(unsettled) > 0 {
		d := receive("g", "the records of seq 2 and 9 the old release had not settled")
		require.True(t, unsettled[d.seq], "group g got seq %d (%s) again, which the old release had settled", d.seq, d.id)
		delete(unsettled, d.seq)
		assert.Equal(t, fmt.Sprintf("orders-%02d", d.seq), d.id)
		assert.Equal(t, 3, d.attempt, "attempt of seq %d: the old release stored 2 attempts of it", d.seq)
	}

	// A record published now in each partition is delivered to both
	// groups, and nothing old before it.
	markers := map[string]bool{}
	parts := map[int]bool{}
	for k := range oldPartitions {
		r, err := bus.Publish(ctx, "orders", []byte(fmt.Sprintf(`{"marker":%d}`, k)),
			event.WithID(fmt.Sprintf("marker-%d", k)), event.WithKey(fmt.Sprintf("k%d", k)))
		require.NoError(t, err)
		assert.Equal(t, uint64(17+k), r.Seq, "seq of a record published now")
		markers[r.ID] = true
		parts[r.Partition] = true
	}
	require.Len(t, parts, oldPartitions, "the records published now are in every partition")
	for _, group := range []string{"g", "dl"} {
		left := maps.Clone(markers)
		for len(left) > 0 {
			d := receive(group, "the records published now")
			require.True(t, markers[d.id], "group %s got seq %d (%s) again, which the old release had settled", group, d.seq, d.id)
			require.True(t, left[d.id], "group %s got %s twice", group, d.id)
			assert.Equal(t, 1, d.attempt, "attempt of %s", d.id)
			delete(left, d.id)
		}
	}
}
