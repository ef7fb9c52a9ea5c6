package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testTopicConfig checks TopicStore: settings created once, read back,
// partitions added and never removed.
func testTopicConfig(t *testing.T, s event.Store) {
	ts, ok := s.(event.TopicStore)
	if !ok {
		t.Skip("store does not implement TopicStore")
	}
	ctx := context.Background()
	_, err := ts.Topic(ctx, "t")
	assert.ErrorIs(t, err, event.ErrNotFound, "a topic without settings")

	got, created, err := ts.CreateTopic(ctx, "t", event.TopicConfig{Partitions: 4})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, 4, got.Partitions)
	got, created, err = ts.CreateTopic(ctx, "t", event.TopicConfig{Partitions: 2})
	require.NoError(t, err)
	assert.False(t, created, "the first settings win")
	assert.Equal(t, 4, got.Partitions, "the stored count, not the asked one")
	got, err = ts.Topic(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, 4, got.Partitions)

	require.NoError(t, ts.AddPartitions(ctx, "t", 4), "the same count is no error")
	require.NoError(t, ts.AddPartitions(ctx, "t", 6))
	got, err = ts.Topic(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, 6, got.Partitions)
	err = ts.AddPartitions(ctx, "t", 3)
	assert.ErrorIs(t, err, event.ErrInvalid, "partitions are never removed")
	assert.ErrorContains(t, err, "partitions")
	got, err = ts.Topic(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, 6, got.Partitions, "a refused change changes nothing")
	assert.ErrorIs(t, ts.AddPartitions(ctx, "none", 3), event.ErrNotFound)

	for _, n := range []int{0, -1} {
		_, _, err = ts.CreateTopic(ctx, "u", event.TopicConfig{Partitions: n})
		assert.ErrorIs(t, err, event.ErrInvalid, "%d partitions", n)
	}
	_, err = ts.Topic(ctx, "u")
	assert.ErrorIs(t, err, event.ErrNotFound, "a refused topic is not created")

	// A topic that holds records from before the store kept settings
	// (here: records appended straight to the store) is given the count
	// its records show.
	_, err = s.Append(ctx, "old", []event.Record{
		{ID: "a", TS: 1, Topic: "old", Partition: 0, Payload: []byte(`1`)},
		{ID: "b", TS: 1, Topic: "old", Partition: 6, Payload: []byte(`2`)},
	})
	require.NoError(t, err)
	if cs, ok := s.(event.CursorStore); ok {
		require.NoError(t, cs.CommitCursor(ctx, event.PartitionRef{Topic: "old", Group: "g", Partition: 7}, 0, event.Fence{}))
	}
	got, created, err = ts.CreateTopic(ctx, "old", event.TopicConfig{Partitions: 1})
	require.NoError(t, err)
	assert.True(t, created)
	want := 7
	if _, ok := s.(event.CursorStore); ok {
		want = 8
	}
	assert.Equal(t, want, got.Partitions, "one more than the highest partition of the topic's records and cursors")
	got, _, err = ts.CreateTopic(ctx, "fresh", event.TopicConfig{Partitions: 3})
	require.NoError(t, err)
	assert.Equal(t, 3, got.Partitions)
}
