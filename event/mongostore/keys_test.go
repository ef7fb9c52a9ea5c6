package mongostore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	pevent "github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

func keyed(topic, id, key string, ts int64) pevent.Record {
	return pevent.Record{ID: id, Topic: topic, Key: key, TS: ts, Payload: json.RawMessage(strconv.Quote(id))}
}

// readAll reads every record of topic, bypassing the cache.
func readAll(t *testing.T, s *mongostore.Store, topic string) []pevent.Record {
	t.Helper()
	var out []pevent.Record
	after := uint64(0)
	for {
		page, err := s.Read(context.Background(), topic, after, 500)
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

// TestLatestConcurrentWriters runs writers in four stores (as four
// processes would) that append keyed records to one topic at once, many
// of them to the same keys: LatestByKey and Latest must end with the
// record of the highest seq of each key, as the log itself says.
func TestLatestConcurrentWriters(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	const stores, writers, perWriter, keys = 4, 3, 40, 12
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range stores {
		s := newStoreIn(t, db, nil)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				for j := 0; j < perWriter; {
					n := min(1+r.IntN(4), perWriter-j)
					batch := make([]pevent.Record, n)
					for b := range batch {
						id := fmt.Sprintf("s%d-w%d-%d", i, w, j+b)
						batch[b] = keyed("t", id, "k"+strconv.Itoa(r.IntN(keys)), time.Now().UnixMilli())
					}
					_, err := s.Append(ctx, "t", batch)
					if !assert.NoError(t, err) {
						return
					}
					j += n
				}
			}()
		}
	}
	wg.Wait()

	check := newStoreIn(t, db, func(c *mongostore.Config) { c.CacheRecords = -1 })
	all := readAll(t, check, "t")
	require.Len(t, all, stores*writers*perWriter)
	want := make(map[string]pevent.Record)
	var names []string
	for _, r := range all {
		if _, ok := want[r.Key]; !ok {
			names = append(names, r.Key)
		}
		want[r.Key] = r // all is in seq order
	}
	got, err := check.LatestByKey(ctx, "t", append(names, "missing"))
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for k, w := range want {
		assert.Equal(t, w.Seq, got[k].Seq, "key %s", k)
		assert.Equal(t, w.ID, got[k].ID, "key %s", k)
	}

	var paged []pevent.Record
	after := ""
	for {
		page, err := check.Latest(ctx, "t", after, 5)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1].Key
	}
	require.Len(t, paged, len(want))
	for i, r := range paged {
		if i > 0 {
			assert.Less(t, paged[i-1].Key, r.Key, "key order")
		}
		assert.Equal(t, want[r.Key].Seq, r.Seq, "key %s", r.Key)
	}
}

// TestLatestSkipsRetainedKeys checks that a key whose latest record
// retention deleted has no state, that Latest fills its pages past such
// keys, and that entries below the floor are dropped.
func TestLatestSkipsRetainedKeys(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	var recs []pevent.Record
	for i := range 6 {
		ts := int64(1000) // old: keys a0..a5 go
		if i >= 4 {
			ts = time.Now().UnixMilli()
		}
		recs = append(recs, keyed("t", "r"+strconv.Itoa(i), "a"+strconv.Itoa(i), ts))
	}
	_, err := s.Append(ctx, "t", recs)
	require.NoError(t, err)
	n, err := s.Prune(ctx, "t", 2000, false)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	floor, err := s.Floor(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(5), floor)

	got, err := s.LatestByKey(ctx, "t", []string{"a0", "a4", "a5"})
	require.NoError(t, err)
	assert.Len(t, got, 2)
	assert.Equal(t, "r4", got["a4"].ID)
	page, err := s.Latest(ctx, "t", "", 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	assert.Equal(t, []string{"a4", "a5"}, []string{page[0].Key, page[1].Key})

	left, err := s.Database().Collection(mongostore.LatestCollection).CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), left, "entries below the floor are dropped")
}

// TestLatestRepair simulates a writer that died between storing a record
// and raising its key's entry: compaction keeps the newer record and
// repairs the entry, and appending the record again repairs it too.
func TestLatestRepair(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	latest := s.Database().Collection(mongostore.LatestCollection)
	_, err := s.Append(ctx, "t", []pevent.Record{keyed("t", "a1", "a", 1000), keyed("t", "a2", "a", 1000)})
	require.NoError(t, err)
	_, err = latest.UpdateOne(ctx, bson.D{{Key: "_id", Value: "t/a"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "seq", Value: int64(1)}}}})
	require.NoError(t, err)

	n, err := s.Prune(ctx, "t", 2000, true)
	require.NoError(t, err)
	assert.Zero(t, n, "an entry behind its key's newest record deletes nothing")
	got, err := s.LatestByKey(ctx, "t", []string{"a"})
	require.NoError(t, err)
	assert.Equal(t, "a2", got["a"].ID, "Prune repaired the entry")
	n, err = s.Prune(ctx, "t", 2000, true)
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	_, err = latest.DeleteOne(ctx, bson.D{{Key: "_id", Value: "t/a"}})
	require.NoError(t, err)
	got, err = s.LatestByKey(ctx, "t", []string{"a"})
	require.NoError(t, err)
	assert.Empty(t, got)
	out, err := s.Append(ctx, "t", []pevent.Record{keyed("t", "a2", "a", 1000)})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), out[0].Seq, "stored already")
	got, err = s.LatestByKey(ctx, "t", []string{"a"})
	require.NoError(t, err)
	assert.Equal(t, "a2", got["a"].ID, "appending again repaired the entry")
}

// TestLatestNeverMovesBack appends an old record of a key again, which
// raises the key's entry to that record's (lower) seq after the newer one
// set it, as a slow writer would: the entry keeps the higher seq.
func TestLatestNeverMovesBack(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	_, err := s.Append(ctx, "t", []pevent.Record{keyed("t", "old", "k", 1), keyed("t", "new", "k", 1)})
	require.NoError(t, err)
	out, err := s.Append(ctx, "t", []pevent.Record{keyed("t", "old", "k", 1)})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), out[0].Seq)
	got, err := s.LatestByKey(ctx, "t", []string{"k"})
	require.NoError(t, err)
	assert.Equal(t, "new", got["k"].ID)
}
