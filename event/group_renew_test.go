package event_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// writeCounter is a MemoryStore that counts the calls that write: of the
// membership and the leases, the cursors, the group state, the records,
// and the settings of topics and groups.
type writeCounter struct {
	*event.MemoryStore
	mu     sync.Mutex
	writes map[string]int
}

func newWriteCounter(clk clock.Clock) *writeCounter {
	return &writeCounter{MemoryStore: event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}), writes: map[string]int{}}
}

func (w *writeCounter) count(call string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes[call]++
}

// counts returns the counts so far, by call, and the renewal rounds begun
// (a round begins with a Heartbeat or a Renew).
func (w *writeCounter) counts() (map[string]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.writes))
	for k, v := range w.writes {
		out[k] = v
	}
	return out, w.writes["Heartbeat"] + w.writes["Renew"]
}

func (w *writeCounter) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	w.count("Heartbeat")
	return w.MemoryStore.Heartbeat(ctx, topic, group, member, ttl)
}

func (w *writeCounter) Leave(ctx context.Context, topic, group, member string) error {
	w.count("Leave")
	return w.MemoryStore.Leave(ctx, topic, group, member)
}

func (w *writeCounter) AcquireLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, bool, error) {
	w.count("AcquireLease")
	return w.MemoryStore.AcquireLease(ctx, p, member, ttl)
}

func (w *writeCounter) ReleaseLease(ctx context.Context, p event.PartitionRef, member string) error {
	w.count("ReleaseLease")
	return w.MemoryStore.ReleaseLease(ctx, p, member)
}

func (w *writeCounter) TakeLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, error) {
	w.count("TakeLease")
	return w.MemoryStore.TakeLease(ctx, p, member, ttl)
}

func (w *writeCounter) Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) ([]string, []event.LeaseGrant, error) {
	w.count("Renew")
	return w.MemoryStore.Renew(ctx, topic, group, member, ttl, parts)
}

func (w *writeCounter) CommitCursor(ctx context.Context, p event.PartitionRef, seq uint64, f event.Fence) error {
	w.count("CommitCursor")
	return w.MemoryStore.CommitCursor(ctx, p, seq, f)
}

func (w *writeCounter) SetCursor(ctx context.Context, p event.PartitionRef, seq uint64) error {
	w.count("SetCursor")
	return w.MemoryStore.SetCursor(ctx, p, seq)
}

func (w *writeCounter) UpdateGroupState(ctx context.Context, p event.PartitionRef, u event.GroupStateUpdate, f event.Fence) error {
	w.count("UpdateGroupState")
	return w.MemoryStore.UpdateGroupState(ctx, p, u, f)
}

func (w *writeCounter) ResetGroupState(ctx context.Context, p event.PartitionRef) error {
	w.count("ResetGroupState")
	return w.MemoryStore.ResetGroupState(ctx, p)
}

func (w *writeCounter) Append(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
	w.count("Append")
	return w.MemoryStore.Append(ctx, topic, recs)
}

func (w *writeCounter) ReadInto(ctx context.Context, topic string, afterSeq uint64, limit int, buf []event.Record) ([]event.Record, error) {
	return w.MemoryStore.ReadInto(ctx, topic, afterSeq, limit, buf)
}

func (w *writeCounter) CreateTopic(ctx context.Context, topic string, cfg event.TopicConfig) (event.TopicConfig, bool, error) {
	w.count("CreateTopic")
	return w.MemoryStore.CreateTopic(ctx, topic, cfg)
}

func (w *writeCounter) AddPartitions(ctx context.Context, topic string, n int) error {
	w.count("AddPartitions")
	return w.MemoryStore.AddPartitions(ctx, topic, n)
}

func (w *writeCounter) CreateGroup(ctx context.Context, topic, group string, cfg event.GroupConfig) (event.GroupConfig, bool, error) {
	w.count("CreateGroup")
	return w.MemoryStore.CreateGroup(ctx, topic, group, cfg)
}

// An idle member of a group writes to the store once per renewal period,
// whatever its partitions: one Renew of its membership and its leases
// (the separate calls were a Heartbeat and an AcquireLease per partition,
// nine writes with eight partitions).
func TestIdleGroupWritesOncePerRenewal(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	const partitions = 8
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := newWriteCounter(clk)
	b, err := event.NewBus(st, event.Config{Clock: clk, LeaseTTL: ttl, Partitions: partitions})
	require.NoError(t, err)
	ctx := context.Background()
	defer func() { assert.NoError(t, b.Close(ctx)) }()
	_, err = b.Subscribe(ctx, "t", "g", func(context.Context, *event.Delivery) error { return nil })
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s := b.Stats()
		return len(s) == 1 && len(s[0].Partitions) == partitions
	}, 10*time.Second, time.Millisecond, "the member takes every partition")

	// next moves the clock to the next renewal and waits for it to begin:
	// then the round before it has ended (a member's rounds run one after
	// the other).
	next := func() map[string]int {
		t.Helper()
		_, r := st.counts()
		clk.Advance(ttl / 3)
		var c map[string]int
		require.Eventually(t, func() bool {
			var n int
			c, n = st.counts()
			return n > r
		}, 10*time.Second, time.Millisecond, "a renewal every LeaseTTL/3")
		return c
	}
	next() // the first renewal after the partitions were taken
	before := next()
	const periods = 5
	var after map[string]int
	for range periods {
		after = next()
	}
	diff := map[string]int{}
	total := 0
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			diff[k] = d
			total += d
		}
	}
	assert.Equal(t, periods, total, "writes of an idle group over %d renewal periods: %v", periods, diff)
	assert.Equal(t, map[string]int{"Renew": periods}, diff)
}
