package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// lister returns s as an [event.Lister]: every store must list what it
// holds.
func lister(t *testing.T, s event.Store) event.Lister {
	t.Helper()
	l, ok := s.(event.Lister)
	require.Truef(t, ok, "%T does not implement event.Lister", s)
	return l
}

func topicInfo(t *testing.T, l event.Lister, topic string) (event.TopicInfo, bool) {
	t.Helper()
	ts, err := l.ListTopics(context.Background())
	require.NoError(t, err)
	for _, ti := range ts {
		if ti.Topic == topic {
			return ti, true
		}
	}
	return event.TopicInfo{}, false
}

func testListTopics(t *testing.T, s event.Store) {
	l := lister(t, s)
	ctx := context.Background()
	ts, err := l.ListTopics(ctx)
	require.NoError(t, err)
	assert.Empty(t, ts, "an empty store lists no topic")

	_, err = s.Append(ctx, "t", []event.Record{rec("t", "a", 100, `1`), rec("t", "b", 200, `22`), rec("t", "c", 300, `333`)})
	require.NoError(t, err)
	_, err = s.Append(ctx, "u", []event.Record{rec("u", "a", 50, `{}`)})
	require.NoError(t, err)
	// Appending a stored id again stores nothing and counts nothing.
	_, err = s.Append(ctx, "t", []event.Record{rec("t", "b", 200, `22`)})
	require.NoError(t, err)

	ts, err = l.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	assert.Equal(t, "t", ts[0].Topic, "sorted by name")
	assert.Equal(t, "u", ts[1].Topic)
	got := ts[0]
	assert.Equal(t, int64(3), got.Events)
	assert.Equal(t, uint64(1), got.FirstSeq)
	assert.Equal(t, int64(100), got.FirstTS)
	assert.Equal(t, uint64(3), got.LastSeq)
	assert.Equal(t, int64(300), got.LastTS)
	assert.Equal(t, int64(6), got.Bytes, "the payloads' bytes")
	assert.Equal(t, int64(1), ts[1].Events)
	assert.Equal(t, int64(2), ts[1].Bytes)
	// A key and headers count too (each store counts headers in its own
	// encoding: at least their names and values).
	_, err = s.Append(ctx, "u", []event.Record{{ID: "k", TS: 60, Topic: "u", Key: "key", Headers: map[string]string{"h": "vv"}, Payload: []byte(`4444`)}})
	require.NoError(t, err)
	u, ok := topicInfo(t, l, "u")
	require.True(t, ok)
	assert.GreaterOrEqual(t, u.Bytes, int64(2+4+3+1+2), "payloads, key, header name and value")
	assert.Less(t, u.Bytes, int64(2+4+3+64), "a bounded share for the headers' encoding")

	pr, ok := s.(event.Pruner)
	if !ok {
		return
	}
	n, err := pr.Prune(ctx, "t", 250, false)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	got, ok = topicInfo(t, l, "t")
	require.True(t, ok, "a pruned topic stays listed")
	assert.Equal(t, int64(1), got.Events)
	assert.Equal(t, uint64(3), got.FirstSeq, "the oldest record left")
	assert.Equal(t, int64(300), got.FirstTS)
	assert.Equal(t, uint64(3), got.LastSeq)
	assert.Equal(t, int64(3), got.Bytes, "the pruned records' bytes are gone")
	n, err = pr.Prune(ctx, "u", 100, false)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	u, ok = topicInfo(t, l, "u")
	require.True(t, ok)
	assert.Zero(t, u.Bytes)
	assert.Zero(t, u.Events)
}

func testListGroups(t *testing.T, s event.Store) {
	l := lister(t, s)
	cs, ok := s.(event.CursorStore)
	require.True(t, ok, "store must implement CursorStore")
	ls, ok := s.(event.LeaseStore)
	require.True(t, ok, "store must implement LeaseStore")
	gss, ok := s.(event.GroupStateStore)
	require.True(t, ok, "store must implement GroupStateStore")
	ctx := context.Background()

	gs, err := l.ListGroups(ctx, "t")
	require.NoError(t, err)
	assert.Empty(t, gs)
	_, err = s.Append(ctx, "t", []event.Record{rec("t", "a", 1, `1`), rec("t", "b", 1, `2`), rec("t", "c", 1, `3`), rec("t", "d", 1, `4`)})
	require.NoError(t, err)

	p0 := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	p1 := event.PartitionRef{Topic: "t", Group: "g", Partition: 1}
	_, err = ls.Heartbeat(ctx, "t", "g", "m1", time.Hour)
	require.NoError(t, err)
	_, ok, err = ls.AcquireLease(ctx, p0, "m1", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, cs.CommitCursor(ctx, p0, 3, event.Fence{}))
	require.NoError(t, cs.CommitCursor(ctx, p1, 1, event.Fence{}))
	require.NoError(t, gss.UpdateGroupState(ctx, p1, event.GroupStateUpdate{Attempts: map[uint64]int{2: 1, 4: 2}, Settled: []uint64{3}}, event.Fence{}))
	require.NoError(t, cs.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "a", Partition: 0}, 4, event.Fence{}))
	require.NoError(t, cs.CommitCursor(ctx, event.PartitionRef{Topic: "other", Group: "x", Partition: 0}, 0, event.Fence{}))

	gs, err = l.ListGroups(ctx, "t")
	require.NoError(t, err)
	require.Len(t, gs, 2, "the groups of t only")
	assert.Equal(t, "a", gs[0].Group, "sorted by name")
	assert.Equal(t, uint64(0), gs[0].Lag)
	assert.Equal(t, []string{}, gs[0].Members)
	g := gs[1]
	assert.Equal(t, "t", g.Topic)
	assert.Equal(t, "g", g.Group)
	assert.Equal(t, uint64(4), g.Head)
	assert.Equal(t, uint64(1), g.Cursor, "the lowest cursor")
	assert.Equal(t, uint64(3), g.Lag)
	assert.Equal(t, 2, g.InFlight, "records with attempts, not settled ones")
	assert.Equal(t, []string{"m1"}, g.Members)
	assert.Equal(t, []event.PartitionInfo{
		{Partition: 0, Cursor: 3, Owner: "m1"},
		{Partition: 1, Cursor: 1, InFlight: 2},
	}, g.Partitions)

	// The group outlives its members.
	require.NoError(t, ls.ReleaseLease(ctx, p0, "m1"))
	require.NoError(t, ls.Leave(ctx, "t", "g", "m1"))
	gs, err = l.ListGroups(ctx, "t")
	require.NoError(t, err)
	require.Len(t, gs, 2)
	assert.Equal(t, []string{}, gs[1].Members)
	assert.Equal(t, uint64(3), gs[1].Lag)
	assert.Empty(t, gs[1].Partitions[0].Owner)

	// Until it is deleted: cursors and state go with it.
	require.NoError(t, l.DeleteGroup(ctx, "t", "g"))
	require.NoError(t, l.DeleteGroup(ctx, "t", "never"), "deleting an unknown group is no error")
	gs, err = l.ListGroups(ctx, "t")
	require.NoError(t, err)
	require.Len(t, gs, 1)
	assert.Equal(t, "a", gs[0].Group)
	cur, err := cs.Cursors(ctx, "t", "g")
	require.NoError(t, err)
	assert.Empty(t, cur)
	st, err := gss.GroupState(ctx, p1)
	require.NoError(t, err)
	assert.Empty(t, st.Attempts)
	assert.Empty(t, st.Settled)

	// A group made again starts afresh.
	_, err = ls.Heartbeat(ctx, "t", "g", "m2", time.Hour)
	require.NoError(t, err)
	require.NoError(t, cs.CommitCursor(ctx, p0, 0, event.Fence{}))
	gs, err = l.ListGroups(ctx, "t")
	require.NoError(t, err)
	require.Len(t, gs, 2)
	assert.Equal(t, []string{"m2"}, gs[1].Members)
	assert.Equal(t, uint64(4), gs[1].Lag)
}
