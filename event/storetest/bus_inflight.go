package storetest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// keyOf returns a key whose records go to partition p of n.
func keyOf(t *testing.T, p, n int) string {
	t.Helper()
	for i := range 10_000 {
		k := "k" + strconv.Itoa(i)
		if event.PartitionOf(k, "", n) == p {
			return k
		}
	}
	t.Fatalf("no key for partition %d of %d", p, n)
	return ""
}

// held collects the deliveries of a manual-ack subscription for the test
// to settle.
type held struct {
	mu sync.Mutex
	ds []*event.Delivery
}

func (h *held) handler(_ context.Context, d *event.Delivery) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ds = append(h.ds, d)
	return nil
}

// take returns the deliveries not taken yet.
func (h *held) take() []*event.Delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	ds := h.ds
	h.ds = nil
	return ds
}

// testRebalanceInFlight is the loss found from outside: a member gives a
// partition up while one of its records is in flight, goes on reading for
// the partitions it keeps, and acks the record in flight. The cursor it
// hands over must not pass the records of the partition that came after:
// the next owner delivers every one of them.
func testRebalanceInFlight(t *testing.T, s event.Store, o Options) {
	s, clk := clocked(t, s, o)
	ctx := context.Background()
	const ttl = 3 * time.Second
	ft := fakeTime{t: t, clk: clk}
	bus := func(name string) *event.Bus {
		return newBus(t, s, func(c *event.Config) {
			c.Clock, c.MemberID, c.Partitions, c.LeaseTTL = clk, name, 2, ttl
		})
	}
	k0, k1 := keyOf(t, 0, 2), keyOf(t, 1, 2)
	a := bus("a")
	var ha, hb held
	subscribe(t, a, "t", "g", ha.handler, event.FromEarliest(), event.WithManualAck(), event.WithAckTimeout(time.Hour))

	first, err := a.Publish(ctx, "t", []byte(`0`), event.WithKey(k1))
	require.NoError(t, err)
	var inflight *event.Delivery
	ft.eventually(10*time.Millisecond, func() bool {
		for _, d := range ha.take() {
			require.Equal(t, first.ID, d.ID)
			inflight = d
		}
		return inflight != nil
	}, "a never got the first record")

	// b joins: a gives partition 1 up, but holds it until the record in
	// flight is settled.
	b := bus("b")
	subscribe(t, b, "t", "g", hb.handler, event.WithManualAck(), event.WithAckTimeout(time.Hour))
	start := clk.Now()
	ft.eventually(50*time.Millisecond, func() bool { return clock.Since(clk, start) > ttl }, "")
	require.Empty(t, hb.take(), "b got a record while a holds partition 1")

	// Records of both partitions; a reads them all for partition 0.
	want := map[string]bool{}
	var of0 []string
	for i := range 3 {
		r, err := a.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithKey(k1))
		require.NoError(t, err)
		want[r.ID] = true
		r, err = a.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithKey(k0))
		require.NoError(t, err)
		of0 = append(of0, r.ID)
	}
	var got0 []string
	ft.eventually(10*time.Millisecond, func() bool {
		for _, d := range ha.take() {
			assert.Equal(t, 0, d.Partition, "a delivered a record of the partition it gives up")
			got0 = append(got0, d.ID)
			require.NoError(t, d.Ack(ctx))
		}
		return len(got0) == len(of0)
	}, "a never got partition 0's records")

	// The ack of the record in flight lets a hand partition 1 over.
	require.NoError(t, inflight.Ack(ctx))
	ft.eventually(10*time.Millisecond, func() bool {
		for _, d := range hb.take() {
			assert.True(t, want[d.ID], "b got %s (seq %d), not one it was owed", d.ID, d.Seq)
			delete(want, d.ID)
			require.NoError(t, d.Ack(ctx))
		}
		return len(want) == 0
	}, "records of partition 1 published during the hand-over never reached b")
}
