package mongostore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/clock"
	pevent "github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

func oldRecs(topic, prefix string, n int) []pevent.Record {
	out := make([]pevent.Record, n)
	for i := range out {
		out[i] = rec(topic, prefix+strconv.Itoa(i))
		out[i].TS = 1000
	}
	return out
}

// TestPruneStaleWriter checks that a writer whose idea of the head is old
// cannot reuse the seqs of records another store appended and pruned,
// including the head record: their tombstones keep the seqs taken.
func TestPruneStaleWriter(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	a, b := newStoreIn(t, db, nil), newStoreIn(t, db, nil)
	ctx := context.Background()
	_, err := a.Append(ctx, "t", oldRecs("t", "a", 1))
	require.NoError(t, err)
	_, err = b.Append(ctx, "t", oldRecs("t", "b", 10))
	require.NoError(t, err)
	n, err := b.Prune(ctx, "t", 2000, false)
	require.NoError(t, err)
	assert.Equal(t, 11, n)
	head, err := b.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(11), head, "the head stays")

	out, err := a.Append(ctx, "t", []pevent.Record{rec("t", "late"), rec("t", "b3")})
	require.NoError(t, err)
	assert.Equal(t, uint64(12), out[0].Seq, "a writer that knew head 1 gets past the tombstones")
	assert.Equal(t, uint64(13), out[1].Seq, "a pruned id is a new record")
	got := readAll(t, b, "t")
	require.Len(t, got, 2)
	assert.Equal(t, "late", got[0].ID)
	_, err = b.FindByID(ctx, "t", "b4")
	assert.ErrorIs(t, err, pevent.ErrNotFound)
	found, err := b.FindByID(ctx, "t", "b3")
	require.NoError(t, err)
	assert.Equal(t, uint64(13), found.Seq)
}

// TestPruneSweepsTombstones checks that tombstones older than TombstoneTTL
// are removed by a later Prune, except the topic's highest document, and
// that a writer idle since before the prune still gets a fresh seq: it
// refreshes its head when what it knows is older than TombstoneTTL/4.
// The stores' clock is a fake one, moved past TombstoneTTL by the test.
func TestPruneSweepsTombstones(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	clk := clock.NewFake(time.Now())
	// Tombstones age on the fake clock; a write's timeout is real time, so
	// it is kept well above a round trip to a loaded test server (1 s
	// failed with round trips of 1.2 s beside busy loops on every core).
	short := func(c *mongostore.Config) {
		c.TombstoneTTL, c.WriteTimeout, c.Clock = 40*time.Second, 10*time.Second, clk
	}
	a, b := newStoreIn(t, db, short), newStoreIn(t, db, short)
	ctx := context.Background()
	events := b.Database().Collection(mongostore.EventsCollection)
	_, err := a.Append(ctx, "t", oldRecs("t", "a", 1))
	require.NoError(t, err)
	_, err = b.Append(ctx, "t", oldRecs("t", "b", 10))
	require.NoError(t, err)
	n, err := b.Prune(ctx, "t", 2000, false)
	require.NoError(t, err)
	require.Equal(t, 11, n)

	n, err = b.Prune(ctx, "t", 2000, false)
	require.NoError(t, err)
	assert.Zero(t, n)
	docs, err := events.CountDocuments(ctx, bson.D{{Key: "topic", Value: "t"}})
	require.NoError(t, err)
	assert.Equal(t, int64(11), docs, "young tombstones stay")

	clk.Advance(40*time.Second + 200*time.Millisecond)
	_, err = b.Prune(ctx, "t", 2000, false)
	require.NoError(t, err)
	docs, err = events.CountDocuments(ctx, bson.D{{Key: "topic", Value: "t"}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), docs, "old tombstones are removed, but the highest document")
	head, err := b.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(11), head)

	out, err := a.Append(ctx, "t", []pevent.Record{rec("t", "late")})
	require.NoError(t, err)
	assert.Equal(t, uint64(12), out[0].Seq, "seqs of removed tombstones are not given again")
	floor, err := b.Floor(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(12), floor)
}

// TestPruneInvalidatesOtherCaches checks that records another store pruned
// are not served from this store's cache of recent records.
func TestPruneInvalidatesOtherCaches(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	a, b := newStoreIn(t, db, nil), newStoreIn(t, db, nil)
	ctx := context.Background()
	recs := oldRecs("t", "r", 4)
	recs = append(recs, rec("t", "fresh"))
	recs[0].Key, recs[2].Key = "k", "k"
	_, err := a.Append(ctx, "t", recs)
	require.NoError(t, err)
	got, err := a.Read(ctx, "t", 0, 10) // served from a's cache
	require.NoError(t, err)
	require.Len(t, got, 5)

	n, err := b.Prune(ctx, "t", 2000, true)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	got, err = a.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	assert.Equal(t, []uint64{2, 3, 4, 5}, seqs(got), "compacted record gone")

	n, err = b.Prune(ctx, "t", 2000, false)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	got, err = a.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	assert.Equal(t, []uint64{5}, seqs(got), "retained records gone")
	got, err = a.Read(ctx, "t", 1, 10)
	require.NoError(t, err)
	assert.Equal(t, []uint64{5}, seqs(got))
}

func seqs(recs []pevent.Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func TestPruneArgs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	_, err := s.Prune(ctx, "a..b", 0, false)
	assert.ErrorIs(t, err, pevent.ErrInvalid)
	_, err = s.LatestByKey(ctx, "a/b", []string{"x"})
	assert.ErrorIs(t, err, pevent.ErrInvalid)
	_, err = s.Latest(ctx, "t", "", 0)
	assert.ErrorIs(t, err, pevent.ErrInvalid)
	n, err := s.Prune(ctx, "empty", 1<<62, false)
	require.NoError(t, err)
	assert.Zero(t, n)
	floor, err := s.Floor(ctx, "empty")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), floor)
}
