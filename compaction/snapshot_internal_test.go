package compaction

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// Snapshotting keys again whose latest record has not changed (a run
// repeated after a crash before its acks, or a change delivered again
// after its lease lapsed) stores nothing new: a snapshot's id comes from
// its source record, and the topic keeps one record per id.
func TestSnapshotAgainStoresNothingNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := event.NewMemoryStore()
	b, err := event.NewBus(s, event.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close(ctx)) }()
	c, err := NewCompactor(Config{Bus: b, Policies: []TopicPolicy{{Topic: "state", Compacted: true, SnapshotTopic: "state.snapshot"}}})
	require.NoError(t, err)
	p := c.cfg.Policies[0]

	keys := make([]string, 100)
	for i := range 300 {
		k := "k" + strconv.Itoa(i%len(keys))
		keys[i%len(keys)] = k
		_, err := b.Publish(ctx, "state", []byte(strconv.Itoa(i)), event.WithKey(k))
		require.NoError(t, err)
	}
	_, err = c.publishSnapshots(ctx, p, keys)
	require.NoError(t, err)
	first, err := s.Read(ctx, "state.snapshot", 0, 1000)
	require.NoError(t, err)
	require.Len(t, first, len(keys))

	_, err = c.publishSnapshots(ctx, p, keys) // the same keys, nothing changed
	require.NoError(t, err)
	again, err := s.Read(ctx, "state.snapshot", 0, 1000)
	require.NoError(t, err)
	require.Len(t, again, len(first), "no snapshot stored twice")
	assert.Equal(t, first, again)

	_, err = b.Publish(ctx, "state", []byte(`"new"`), event.WithKey("k7"))
	require.NoError(t, err)
	_, err = c.publishSnapshots(ctx, p, keys)
	require.NoError(t, err)
	after, err := s.Read(ctx, "state.snapshot", 0, 1000)
	require.NoError(t, err)
	require.Len(t, after, len(keys)+1, "a changed key gets a new snapshot")
	last := after[len(after)-1]
	assert.Equal(t, "k7", last.Key)
	assert.JSONEq(t, `"new"`, string(last.Payload))
}
