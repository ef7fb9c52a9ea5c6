package event_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// Each limit of the memory store refuses the publish that would pass it,
// naming it, and loses nothing already stored.
func TestMemoryStoreLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	payload := func(n int) []byte { return []byte(`"` + strings.Repeat("x", n-2) + `"`) }
	tests := []struct {
		name  string
		cfg   event.MemoryStoreConfig
		fill  func(b *event.Bus) []event.Record // what fits
		over  func(b *event.Bus) error          // the publish over the limit
		limit string
	}{
		{"MaxTopicEvents", event.MemoryStoreConfig{MaxTopicEvents: 3},
			func(b *event.Bus) []event.Record {
				var rs []event.Record
				for range 3 {
					r, err := b.Publish(ctx, "t", []byte(`1`))
					require.NoError(t, err)
					rs = append(rs, r)
				}
				_, err := b.Publish(ctx, "other", []byte(`1`)) // per topic
				require.NoError(t, err)
				return rs
			},
			func(b *event.Bus) error { _, err := b.Publish(ctx, "t", []byte(`1`)); return err },
			"MaxTopicEvents (3)"},
		{"MaxTopicBytes", event.MemoryStoreConfig{MaxTopicBytes: 100},
			func(b *event.Bus) []event.Record {
				r1, err := b.Publish(ctx, "t", payload(60))
				require.NoError(t, err)
				r2, err := b.Publish(ctx, "t", payload(30), event.WithKey("k"), event.WithHeaders(map[string]string{"h": "v"})) // 30+1+2 bytes
				require.NoError(t, err)
				_, err = b.Publish(ctx, "other", payload(90))
				require.NoError(t, err)
				return []event.Record{r1, r2}
			},
			func(b *event.Bus) error { _, err := b.Publish(ctx, "t", payload(8)); return err },
			"MaxTopicBytes (100)"},
		{"MaxBytes", event.MemoryStoreConfig{MaxBytes: 100},
			func(b *event.Bus) []event.Record {
				r1, err := b.Publish(ctx, "t", payload(50))
				require.NoError(t, err)
				r2, err := b.Publish(ctx, "u", payload(50))
				require.NoError(t, err)
				return []event.Record{r1, r2}
			},
			func(b *event.Bus) error { _, err := b.Publish(ctx, "v", payload(2)); return err },
			"MaxBytes (100)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := event.NewMemoryStoreWith(tc.cfg)
			b, err := event.NewBus(st, event.Config{})
			require.NoError(t, err)
			defer func() { assert.NoError(t, b.Close(ctx)) }()
			stored := tc.fill(b)
			err = tc.over(b)
			require.ErrorIs(t, err, event.ErrStoreFull)
			assert.Contains(t, err.Error(), tc.limit)
			for _, r := range stored {
				got, err := st.FindByID(ctx, r.Topic, r.ID)
				require.NoError(t, err, "a stored record was lost")
				assert.Equal(t, r.Payload, got.Payload)
			}
			// Publishing a stored id again is no new record: it is not refused.
			again, err := b.Append(ctx, stored[0].Topic, []event.Record{stored[0]})
			require.NoError(t, err)
			assert.Equal(t, stored[0].Seq, again[0].Seq)
			// Retention makes room.
			_, err = st.Prune(ctx, stored[0].Topic, time.Now().Add(time.Hour).UnixMilli(), false)
			require.NoError(t, err)
			assert.NoError(t, tc.over(b))
		})
	}
}

// keepNothing is a cursor and group-state store that keeps nothing: the
// state of a group is the group's and stays in its store by design; the
// test below measures what a subscription leaves behind.
type keepNothing struct{}

func (keepNothing) Cursors(context.Context, string, string) (map[int]uint64, error) {
	return map[int]uint64{}, nil
}
func (keepNothing) CommitCursor(context.Context, event.PartitionRef, uint64, event.Fence) error {
	return nil
}
func (keepNothing) SetCursor(context.Context, event.PartitionRef, uint64) error { return nil }
func (keepNothing) GroupState(context.Context, event.PartitionRef) (event.GroupState, error) {
	return event.GroupState{}, nil
}
func (keepNothing) UpdateGroupState(context.Context, event.PartitionRef, event.GroupStateUpdate, event.Fence) error {
	return nil
}
func (keepNothing) ResetGroupState(context.Context, event.PartitionRef) error { return nil }

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// 20,000 subscribe/unsubscribe cycles, each on a topic and group of its
// own, leave the memory store's heap where it was: a subscription's watch,
// membership and leases are freed when it ends. A topic's settings (its
// partition count) are the topic's and stay, as its records would, and so
// are a group's settings (until the group is deleted or expires): the
// topics and groups are made before the heap is measured. Of the members
// that left the store keeps tombstones (see MemoryStore.Leave), at most
// memMaxTombs (1,024, about half a megabyte here).
func TestMemoryStoreFreesSubscriptionState(t *testing.T) {
	ctx := context.Background()
	b, err := event.NewBus(event.NewMemoryStore(), event.Config{Cursors: keepNothing{}, GroupState: keepNothing{}})
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.Close(ctx)) }()
	cycle := func(i int) {
		s, err := b.Subscribe(ctx, "t"+strconv.Itoa(i), "g", func(context.Context, *event.Delivery) error { return nil })
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	for i := range 100 {
		cycle(-i - 1) // warm up
	}
	for i := range 20000 {
		_, err := b.Partitions(ctx, "t"+strconv.Itoa(i))
		require.NoError(t, err)
		_, err = b.CreateGroup(ctx, "t"+strconv.Itoa(i), "g", event.GroupConfig{})
		require.NoError(t, err)
	}
	start := heapInUse()
	for i := range 20000 {
		cycle(i)
	}
	end := heapInUse()
	growth := int64(end) - int64(start)
	t.Logf("heap growth after 20,000 cycles: %d bytes", growth)
	assert.Less(t, growth, int64(1<<20), "the heap grew by %d bytes", growth)
}

// A small topic costs little: a topic of one record holds no full-size
// chunk of records or slab of payloads.
func TestMemoryStoreSmallTopicIsSmall(t *testing.T) {
	ctx := context.Background()
	st := event.NewMemoryStore()
	start := heapInUse()
	const topics = 2000
	for i := range topics {
		topic := "t" + strconv.Itoa(i)
		_, err := st.Append(ctx, topic, []event.Record{{ID: "id" + strconv.Itoa(i), Topic: topic, Payload: []byte(`{"a":1}`)}})
		require.NoError(t, err)
	}
	per := (int64(heapInUse()) - int64(start)) / topics
	runtime.KeepAlive(st)
	t.Logf("a topic of one record: %d bytes", per)
	assert.Less(t, per, int64(4<<10), "a topic of one record holds %d bytes", per)
}
