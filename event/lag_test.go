package event_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// With several partitions, the oldest unsettled record is the first one
// above its own partition's cursor; its age is by the Bus's clock.
func TestLagPartitions(t *testing.T) {
	t.Parallel()
	store := event.NewMemoryStore()
	bus, err := event.NewBus(store, event.Config{Partitions: 2, Clock: clock.NewFake(time.UnixMilli(2000))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bus.Close(context.Background()) })
	ctx := context.Background()
	var seqs [2][]uint64
	for i := 0; i < 20; i++ {
		r, err := bus.Publish(ctx, "p", []byte(`1`), event.WithTS(int64(1000+i)))
		require.NoError(t, err)
		seqs[r.Partition] = append(seqs[r.Partition], r.Seq)
	}
	require.NotEmpty(t, seqs[0])
	require.NotEmpty(t, seqs[1])
	// Partition 0 has settled everything, partition 1 nothing.
	require.NoError(t, store.SetCursor(ctx, event.PartitionRef{Topic: "p", Group: "g", Partition: 0}, 20))
	require.NoError(t, store.SetCursor(ctx, event.PartitionRef{Topic: "p", Group: "g", Partition: 1}, 0))
	st, err := bus.GroupStatus(ctx, "p", "g")
	require.NoError(t, err)
	assert.Equal(t, uint64(20), st.Lag)
	assert.Zero(t, st.Committed)
	require.NotNil(t, st.Oldest)
	assert.Equal(t, seqs[1][0], st.Oldest.Seq)
	assert.Equal(t, int64(2000-1000)-int64(seqs[1][0]-1), st.LagMs)
	assert.Equal(t, []event.PartitionInfo{{Partition: 0, Cursor: 20}, {Partition: 1, Cursor: 0}}, st.Partitions)
}

func TestStatusOfAnUnknownGroup(t *testing.T) {
	t.Parallel()
	bus := newTestBus(t)
	_, err := bus.GroupStatus(context.Background(), "p", "nobody")
	assert.ErrorIs(t, err, event.ErrNotFound)
}
