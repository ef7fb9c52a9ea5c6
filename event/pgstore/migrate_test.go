package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/internal/testpg"
)

// A database made before promlib_topics counted bytes gets the column on
// open, counted once from the records it holds, and counts on from there.
func TestOpenCountsBytesOfAnOlderDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testpg.Schema(t)
	s := openStore(t, schema)
	_, err := s.Append(ctx, "t", []event.Record{
		{ID: "a", Topic: "t", Payload: []byte(`1`)},
		{ID: "b", Topic: "t", Key: "k", Headers: map[string]string{"h": "v"}, Payload: []byte(`22`)},
	})
	require.NoError(t, err)
	before, err := s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, before, 1)
	_, err = s.DB().ExecContext(ctx, `ALTER TABLE promlib_topics DROP COLUMN bytes`)
	require.NoError(t, err)

	s2 := openStore(t, schema)
	ts, err := s2.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, before[0].Bytes, ts[0].Bytes, "counted again from the records, as the appends counted them")
	_, err = s2.Append(ctx, "t", []event.Record{{ID: "c", Topic: "t", Payload: []byte(`333`)}})
	require.NoError(t, err)
	ts, err = s2.ListTopics(ctx)
	require.NoError(t, err)
	assert.Equal(t, before[0].Bytes+3, ts[0].Bytes)
	assert.Equal(t, int64(3), ts[0].Events)
}

// A database made before leases had tokens gets the column on open. Its
// lease rows have token 0, which no fence matches, not even the holder's;
// the holder's next grant gives it a real token, and a take-over a greater
// one.
func TestOpenGivesLeasesOfAnOlderDatabaseTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testpg.Schema(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	onClock := func(c *pgstore.Config) { c.Clock = clk }
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	const ttl = 10 * time.Second
	s := openStore(t, schema, onClock)
	_, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = s.DB().ExecContext(ctx, `ALTER TABLE promlib_leases DROP COLUMN token`)
	require.NoError(t, err)

	s2 := openStore(t, schema, onClock)
	for _, f := range []event.Fence{{Member: "a", Token: 0}, {Member: "a", Token: 1}} {
		assert.ErrorIs(t, s2.CommitCursor(ctx, p, 1, f), event.ErrLeaseLost, "a lease row of the old database matches no fence (%v)", f)
	}
	ta, ok, err := s2.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok, "the holder renews its lease")
	assert.Equal(t, uint64(1), ta, "its token 0 is raised")
	require.NoError(t, s2.CommitCursor(ctx, p, 2, event.Fence{Member: "a", Token: ta}))

	clk.Advance(ttl + time.Second)
	tb, ok, err := s2.AcquireLease(ctx, p, "b", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, tb, ta)
	assert.ErrorIs(t, s2.CommitCursor(ctx, p, 3, event.Fence{Member: "a", Token: ta}), event.ErrLeaseLost)
	require.NoError(t, s2.CommitCursor(ctx, p, 3, event.Fence{Member: "b", Token: tb}))
	c, err := s2.Cursors(ctx, p.Topic, p.Group)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), c[p.Partition])
}
