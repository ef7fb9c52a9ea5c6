package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
)

// A file made before promlib_topics counted records and their bytes gets
// its counts on open, and counts on from there.
func TestOpenCountsAnOlderFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openStore(t, path)
	_, err := s.Append(ctx, "t", []event.Record{{ID: "a", Topic: "t", Payload: []byte(`1`)}, {ID: "b", Topic: "t", Payload: []byte(`2`)}})
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))
	w, r, err := sqlitestore.OpenDB(path, sqlitestore.Config{})
	require.NoError(t, err)
	_, err = w.ExecContext(ctx, `ALTER TABLE promlib_topics DROP COLUMN events`)
	require.NoError(t, err)
	_, err = w.ExecContext(ctx, `ALTER TABLE promlib_topics DROP COLUMN bytes`)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, r.Close())

	s = openStore(t, path)
	_, err = s.Append(ctx, "t", []event.Record{{ID: "c", Topic: "t", Payload: []byte(`3`)}})
	require.NoError(t, err)
	ts, err := s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, int64(3), ts[0].Events)
	assert.Equal(t, int64(3), ts[0].Bytes, "the payloads' bytes")
}

// A file made before leases had tokens gets the column on open, also when
// several stores open it at once. Its lease rows have token 0, which no
// fence matches, not even the holder's; the holder's next grant gives it a
// real token, and a take-over a greater one.
func TestOpenGivesLeasesOfAnOlderFileTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	onClock := func(c *sqlitestore.Config) { c.Clock = clk }
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	const ttl = 10 * time.Second
	s := openStore(t, path, onClock)
	_, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Close(ctx))
	w, r, err := sqlitestore.OpenDB(path, sqlitestore.Config{})
	require.NoError(t, err)
	_, err = w.ExecContext(ctx, `ALTER TABLE promlib_leases DROP COLUMN token`)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, r.Close())

	// Processes opening the old file together: one adds the column, the
	// others find it.
	opened := make(chan error, 4)
	for range cap(opened) {
		go func() {
			s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{Clock: clk})
			if err == nil {
				err = s.Close(ctx)
			}
			opened <- err
		}()
	}
	for range cap(opened) {
		require.NoError(t, <-opened)
	}

	s = openStore(t, path, onClock)
	for _, f := range []event.Fence{{Member: "a", Token: 0}, {Member: "a", Token: 1}} {
		assert.ErrorIs(t, s.CommitCursor(ctx, p, 1, f), event.ErrLeaseLost, "a lease row of the old file matches no fence (%v)", f)
	}
	ta, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok, "the holder renews its lease")
	assert.Equal(t, uint64(1), ta, "its token 0 is raised")
	require.NoError(t, s.CommitCursor(ctx, p, 2, event.Fence{Member: "a", Token: ta}))

	clk.Advance(ttl + time.Second)
	tb, ok, err := s.AcquireLease(ctx, p, "b", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, tb, ta)
	assert.ErrorIs(t, s.CommitCursor(ctx, p, 3, event.Fence{Member: "a", Token: ta}), event.ErrLeaseLost)
	require.NoError(t, s.CommitCursor(ctx, p, 3, event.Fence{Member: "b", Token: tb}))
	c, err := s.Cursors(ctx, p.Topic, p.Group)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), c[p.Partition])
}
