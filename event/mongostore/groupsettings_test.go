package mongostore_test

import (
	"context"
	"encoding/json"
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

// Of concurrent creations of a group's settings through two stores on one
// database (two processes), exactly one creates them, and they are kept
// as the JSON text of the GroupConfig.
func TestGroupSettingsCreatedOnceAcrossStores(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	stores := []*mongostore.Store{newStoreIn(t, db, nil), newStoreIn(t, db, nil)}
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	res := make([]event.GroupConfig, n)
	made := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], made[i], errs[i] = stores[i%2].CreateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: i + 1, AckTimeout: time.Second})
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, res[0], res[i])
		if made[i] {
			created++
		}
	}
	assert.Equal(t, 1, created)

	var doc struct {
		Topic  string `bson:"topic"`
		Group  string `bson:"group"`
		Config string `bson:"config"`
	}
	require.NoError(t, client(t).Database(db).Collection(mongostore.GroupSettingsCollection).
		FindOne(ctx, bson.D{{Key: "_id", Value: "t/g"}}).Decode(&doc))
	assert.Equal(t, "t", doc.Topic)
	assert.Equal(t, "g", doc.Group)
	var stored event.GroupConfig
	require.NoError(t, json.Unmarshal([]byte(doc.Config), &stored))
	assert.Equal(t, res[0], stored)
	assert.Contains(t, doc.Config, `"ackTimeoutMs":1000`)
}

// A database of an older release has cursor documents without a commit
// time: EnsureIndexes gives them its time, which is then the group's
// LastActive, and a cursor commit raises it.
func TestGroupActivityOfAnOlderRelease(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	ctx := context.Background()
	d := client(t).Database(db)
	_, err := d.Collection(mongostore.CursorsCollection).InsertOne(ctx, bson.D{
		{Key: "topic", Value: "t"}, {Key: "group", Value: "old"}, {Key: "partition", Value: int32(0)}, {Key: "seq", Value: int64(7)},
	})
	require.NoError(t, err)
	_, err = d.Collection(mongostore.GroupsCollection).InsertOne(ctx, bson.D{{Key: "_id", Value: "t"}, {Key: "groups", Value: bson.A{"old"}}})
	require.NoError(t, err)

	clk := clock.NewFake(time.UnixMilli(1_800_000_000_000))
	s := newStoreIn(t, db, func(c *mongostore.Config) { c.Clock = clk })
	opened := clk.Now().UnixMilli()
	info := func() event.GroupInfo {
		t.Helper()
		gis, err := s.ListGroups(ctx, "t")
		require.NoError(t, err)
		require.Len(t, gis, 1)
		return gis[0]
	}
	gi := info()
	assert.Equal(t, opened, gi.LastActive, "the migration counts as activity")
	assert.Nil(t, gi.Config, "a group of an older release has no settings")
	assert.Equal(t, uint64(7), gi.Cursor)

	clk.Advance(time.Hour)
	require.NoError(t, s.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "old"}, 9, event.Fence{}))
	assert.Equal(t, clk.Now().UnixMilli(), info().LastActive, "a commit raises it")

	done, err := s.ExpireGroup(ctx, "t", "old", clk.Now().UnixMilli())
	require.NoError(t, err)
	assert.False(t, done, "active at the cut-off")
	done, err = s.ExpireGroup(ctx, "t", "old", clk.Now().UnixMilli()+1)
	require.NoError(t, err)
	assert.True(t, done, "a group without settings expires too")
	gis, err := s.ListGroups(ctx, "t")
	require.NoError(t, err)
	assert.Empty(t, gis)
}
