package mongostore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// The poll of a topic's head looks up the _id of the next seq, of seq 1
// while the topic has shown none; every tenth poll reads the head in full.
func TestPollHead(t *testing.T) {
	t.Parallel()
	s := fakeStore(t, nil)
	ctx := context.Background()
	poll := func(last uint64, full bool) uint64 {
		t.Helper()
		h, err := s.pollHead(ctx, "t", last, full)
		require.NoError(t, err)
		return h
	}
	assert.Zero(t, poll(0, false), "empty topic")
	assert.Zero(t, poll(0, true), "empty topic, in full")
	var recs []event.Record
	for _, id := range []string{"a", "b", "c"} {
		recs = append(recs, event.Record{ID: id, Topic: "t", Payload: []byte(`{}`)})
	}
	_, err := s.Append(ctx, "t", recs)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), poll(0, false), "a topic's first records")
	assert.Equal(t, uint64(3), poll(1, false))
	assert.Equal(t, uint64(3), poll(3, false), "no record after the last")

	// Seq 1 and 2 gone (as after a prune whose tombstones expired): the
	// lookup of seq 1 finds nothing, the full read finds the head.
	_, err = s.events.DeleteMany(ctx, map[string]any{fID: map[string]any{"$in": []any{docID("t", 1), docID("t", 2)}}})
	require.NoError(t, err)
	assert.Zero(t, poll(0, false), "the lookup of seq 1 reads no head")
	assert.Equal(t, uint64(3), poll(0, true), "the full poll")
}
