package mongostore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// A database written by a version that kept leases in the leases
// collection: its cursors keep their seqs and its group state, its lease
// documents are ignored, and the partitions are leased and fenced in the
// cursor documents from the first grant on.
func TestLeasesMoveIntoCursorDocuments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	db := client(t).Database(testDB(t))
	key := bson.D{{Key: "topic", Value: "t"}, {Key: "group", Value: "g"}, {Key: "partition", Value: int32(0)}}
	_, err := db.Collection(mongostore.CursorsCollection).InsertOne(ctx, append(key, bson.E{Key: "seq", Value: int64(7)}))
	require.NoError(t, err)
	_, err = db.Collection(mongostore.LeasesCollection).InsertOne(ctx,
		append(key, bson.E{Key: "member", Value: "old"}, bson.E{Key: "expiresAt", Value: clk.Now().Add(time.Hour)}))
	require.NoError(t, err)
	_, err = db.Collection(mongostore.GroupStateCollection).InsertOne(ctx,
		append(bson.D{{Key: "_id", Value: "t/g/0"}}, append(key, bson.E{Key: "s", Value: bson.D{{Key: "9", Value: int32(2)}}})...))
	require.NoError(t, err)
	_, err = db.Collection(mongostore.GroupsCollection).InsertOne(ctx, bson.D{{Key: "_id", Value: "t"}, {Key: "groups", Value: bson.A{"g"}}})
	require.NoError(t, err)

	s := newStoreIn(t, db.Name(), func(c *mongostore.Config) { c.Clock = clk })
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	cur, err := s.Cursors(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, map[int]uint64{0: 7}, cur)

	tok, ok, err := s.AcquireLease(ctx, p, "m1", time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "the old version's lease document is not read")
	assert.Equal(t, uint64(1), tok)
	f := event.Fence{Member: "m1", Token: tok}
	require.NoError(t, s.CommitCursor(ctx, p, 5, f), "a fenced commit below the cursor is no error")
	cur, err = s.Cursors(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, map[int]uint64{0: 7}, cur, "and changes nothing")
	require.NoError(t, s.CommitCursor(ctx, p, 8, f))
	require.NoError(t, s.UpdateGroupState(ctx, p, event.GroupStateUpdate{Settled: []uint64{10}}, f))
	st, err := s.GroupState(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, event.GroupState{Attempts: map[uint64]int{9: 2}, Settled: []uint64{10}}, st, "the old state stays")

	gs, err := s.ListGroups(ctx, "t")
	require.NoError(t, err)
	require.Len(t, gs, 1)
	assert.Equal(t, []event.PartitionInfo{{Partition: 0, Cursor: 8, Owner: "m1", InFlight: 1}}, gs[0].Partitions)
}

// Members racing for a free partition: one gets it. A partition leased
// before any cursor was committed has no cursor.
func TestAcquireLeaseRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := newStore(t, func(c *mongostore.Config) { c.Clock = clk })
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 3}
	const ttl = 10 * time.Second
	race := func() map[string]uint64 {
		t.Helper()
		var mu sync.Mutex
		won := map[string]uint64{}
		var wg sync.WaitGroup
		for _, m := range []string{"a", "b", "c", "d", "e", "f"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tok, ok, err := s.AcquireLease(ctx, p, m, ttl)
				assert.NoError(t, err)
				if ok {
					mu.Lock()
					won[m] = tok
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return won
	}
	won := race()
	require.Len(t, won, 1, "one member gets a free partition")
	for _, tok := range won {
		assert.Equal(t, uint64(1), tok)
	}
	cur, err := s.Cursors(ctx, p.Topic, p.Group)
	require.NoError(t, err)
	assert.Empty(t, cur, "a lease is no cursor")

	clk.Advance(ttl)
	again := race()
	require.Len(t, again, 1, "one member gets an expired partition")
	for m, tok := range again {
		if _, same := won[m]; same {
			assert.Equal(t, uint64(1), tok, "the last holder gets its token back")
		} else {
			assert.Equal(t, uint64(2), tok, "another member gets a new token")
		}
	}
}
