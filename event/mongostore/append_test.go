package mongostore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	pevent "github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

func rec(topic, id string) pevent.Record {
	return pevent.Record{ID: id, Topic: topic, TS: time.Now().UnixMilli(), Payload: json.RawMessage(`{"id":"` + id + `"}`)}
}

// TestConcurrentWritersLeaveNoGap runs writers in three stores (as three
// processes would) while a reader that bypasses every cache pages through
// the topic: every page must continue right after the last seq read, so no
// seq ever shows up after a higher one was read.
func TestConcurrentWritersLeaveNoGap(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	stores := make([]*mongostore.Store, 3)
	for i := range stores {
		stores[i] = newStoreIn(t, db, nil)
	}
	reader := newStoreIn(t, db, func(c *mongostore.Config) { c.CacheRecords = -1 })
	const writers, perWriter = 6, 40
	ctx := context.Background()

	var stop atomic.Bool
	readerDone := make(chan error, 1)
	go func() {
		pace := time.NewTicker(time.Millisecond)
		defer pace.Stop()
		after := uint64(0)
		for {
			done := stop.Load()
			page, err := reader.Read(ctx, "t", after, 50)
			if err != nil {
				readerDone <- err
				return
			}
			for _, r := range page {
				if r.Seq != after+1 {
					readerDone <- fmt.Errorf("read seq %d right after %d: a gap", r.Seq, after)
					return
				}
				after = r.Seq
			}
			if done && len(page) == 0 {
				readerDone <- nil
				return
			}
			if len(page) == 0 {
				// Caught up: look again shortly. Reading in a tight loop
				// would queue a scan of the collection (on the test server)
				// ahead of each of the writers' commands, and on a loaded
				// machine hold an Append past its WriteTimeout.
				<-pace.C
			}
		}
	}()

	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%len(stores)]
			for i := range perWriter {
				n := 1 + i%3 // batches of 1 to 3 records
				batch := make([]pevent.Record, n)
				for j := range batch {
					batch[j] = rec("t", fmt.Sprintf("w%d-%d-%d", w, i, j))
				}
				out, err := s.Append(ctx, "t", batch)
				if !assert.NoError(t, err) {
					return
				}
				for j := 1; j < len(out); j++ {
					assert.Equal(t, out[j-1].Seq+1, out[j].Seq, "one Append gets consecutive seqs")
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	require.NoError(t, <-readerDone)

	want := 0
	for i := range perWriter {
		want += 1 + i%3
	}
	want *= writers
	head, err := reader.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(want), head)
	all, err := reader.Read(ctx, "t", 0, want+10)
	require.NoError(t, err)
	require.Len(t, all, want)
	ids := make(map[string]bool)
	for i, r := range all {
		assert.Equal(t, uint64(i+1), r.Seq)
		assert.False(t, ids[r.ID], "id %s stored twice", r.ID)
		ids[r.ID] = true
	}
}

// TestIdempotentAcrossStores appends the same ids from several stores at
// once: each id is stored once and every caller gets the stored record.
func TestIdempotentAcrossStores(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	ctx := context.Background()
	const n = 30
	results := make([][]pevent.Record, 4)
	var wg sync.WaitGroup
	for i := range results {
		s := newStoreIn(t, db, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]pevent.Record, n)
			for j := range batch {
				batch[j] = rec("t", "id-"+strconv.Itoa(j))
			}
			out, err := s.Append(ctx, "t", batch)
			assert.NoError(t, err)
			results[i] = out
		}()
	}
	wg.Wait()
	s := newStoreIn(t, db, nil)
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(n), head, "each id stored once")
	for _, out := range results {
		require.Len(t, out, n)
		for j, r := range out {
			stored, err := s.FindByID(ctx, "t", r.ID)
			require.NoError(t, err)
			assert.Equal(t, stored.Seq, r.Seq, "record %d", j)
		}
	}
}

// insertCounter counts insert commands on the events collection.
// insertCounter counts the inserts into events a client sends (n), the
// documents they hold, and the updates of the topics documents (the
// summaries).
type insertCounter struct {
	n         atomic.Int64
	docs      atomic.Int64
	summaries atomic.Int64
}

func (c *insertCounter) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		switch {
		case e.CommandName == "insert" && e.Command.Lookup("insert").StringValue() == "events":
			c.n.Add(1)
			if docs, ok := e.Command.Lookup("documents").ArrayOK(); ok {
				vals, _ := docs.Values()
				c.docs.Add(int64(len(vals)))
			}
		case e.CommandName == "update" && e.Command.Lookup("update").StringValue() == "topics":
			c.summaries.Add(1)
		}
	}}
}

// TestGroupCommit checks that one Append without concurrency is one insert
// at once, and that concurrent Appends share inserts.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	var cnt insertCounter
	c, err := mongo.Connect(options.Client().ApplyURI(mongoURL(t)).SetMonitor(cnt.monitor()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	s, err := mongostore.New(c, mongostore.Config{Database: testDB(t)})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.EnsureIndexes(ctx))
	t.Cleanup(func() { _ = s.Close(ctx) })

	_, err = s.Append(ctx, "t", []pevent.Record{rec("t", "solo")})
	require.NoError(t, err)
	assert.Equal(t, int64(1), cnt.n.Load(), "a lone append is one insert")

	const callers = 64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Append(ctx, "t", []pevent.Record{rec("t", "c"+strconv.Itoa(i))})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	inserts := cnt.n.Load() - 1
	t.Logf("%d concurrent appends took %d inserts", callers, inserts)
	assert.Less(t, inserts, int64(callers), "concurrent appends share inserts")
	assert.Equal(t, int64(callers+1), cnt.docs.Load(), "every record inserted once")
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(callers+1), head)
}

// TestAppendCancelled checks that a cancelled Append reports it.
func TestAppendCancelled(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Append(ctx, "t", []pevent.Record{rec("t", "a")})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestAppendRefusesBadRecords(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		topic string
		rec   pevent.Record
		field string
	}{
		{"badTopic", "a..b", rec("a..b", "x"), "topic"},
		{"otherTopic", "t", rec("u", "x"), "topic"},
		{"noID", "t", rec("t", ""), "id"},
		{"notJSON", "t", pevent.Record{ID: "x", Topic: "t", Payload: []byte("{")}, "payload"},
		{"emptyPayload", "t", pevent.Record{ID: "x", Topic: "t"}, "payload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Append(ctx, tc.topic, []pevent.Record{tc.rec})
			assert.ErrorIs(t, err, pevent.ErrInvalid)
			assert.ErrorContains(t, err, tc.field)
		})
	}
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Zero(t, head)
}
