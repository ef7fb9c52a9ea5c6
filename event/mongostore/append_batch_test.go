package mongostore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	pevent "github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// huge returns a record whose payload is larger than a MongoDB document.
func huge(topic, id string) pevent.Record {
	r := rec(topic, id)
	r.Payload = []byte(`"` + strings.Repeat("x", 17<<20) + `"`)
	return r
}

// countedStore returns a store whose client counts its inserts.
func countedStore(t *testing.T, mod func(*mongostore.Config)) (*mongostore.Store, *insertCounter) {
	t.Helper()
	cnt := &insertCounter{}
	c, err := mongo.Connect(options.Client().ApplyURI(mongoURL(t)).SetMonitor(cnt.monitor()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	cfg := mongostore.Config{Database: testDB(t)}
	if mod != nil {
		mod(&cfg)
	}
	s, err := mongostore.New(c, cfg)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.EnsureIndexes(ctx))
	t.Cleanup(func() { _ = s.Close(ctx) })
	return s, cnt
}

// TestAppendRecordFailsAlone checks that a record no document can hold
// fails alone: the append stores the others, in order, and names the
// refused one in an event.RecordErrors.
func TestAppendRecordFailsAlone(t *testing.T) {
	t.Parallel()
	s, cnt := countedStore(t, nil)
	ctx := context.Background()
	out, err := s.Append(ctx, "t", []pevent.Record{rec("t", "a"), huge("t", "big"), rec("t", "b")})
	var re *pevent.RecordErrors
	require.ErrorAs(t, err, &re)
	require.Len(t, re.Errs, 3)
	assert.NoError(t, re.Errs[0])
	assert.ErrorIs(t, re.Errs[1], pevent.ErrInvalid)
	assert.ErrorContains(t, re.Errs[1], `"big"`)
	assert.NoError(t, re.Errs[2])
	assert.ErrorIs(t, err, pevent.ErrInvalid, "errors.Is sees the refused record's error")
	require.Len(t, out, 3)
	assert.Equal(t, uint64(1), out[0].Seq)
	assert.Equal(t, uint64(2), out[2].Seq)
	assert.Equal(t, int64(1), cnt.n.Load(), "the others went in one insert")
	_, err = s.FindByID(ctx, "t", "big")
	assert.ErrorIs(t, err, pevent.ErrNotFound)

	// Alone, the record gets its own error, not a RecordErrors.
	_, err = s.Append(ctx, "t", []pevent.Record{huge("t", "big")})
	assert.ErrorIs(t, err, pevent.ErrInvalid)
	assert.NotErrorAs(t, err, &re)
}

// TestPublisherFillsBatches checks that a Publisher's pipelined publishes
// reach the group commit as batches of up to MaxBatch records, and that a
// bad record among them fails alone without a retry of the others.
func TestPublisherFillsBatches(t *testing.T) {
	t.Parallel()
	s, cnt := countedStore(t, func(c *mongostore.Config) { c.MaxBatch = 50 })
	bus, err := pevent.NewBus(s, pevent.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	t.Cleanup(func() { _ = bus.Close(ctx) })
	// MaxBatchBytes lets the large record into a batch with good ones.
	pub, err := bus.NewPublisher(pevent.PublisherConfig{MaxPending: 500, MaxBatchBytes: 64 << 20})
	require.NoError(t, err)

	const n = 400
	var res []*pevent.PublishFuture
	for i := range n {
		p := []byte(`{"i":1}`)
		if i == 123 {
			p = huge("t", "x").Payload
		}
		res = append(res, pub.Publish(ctx, "t", p))
	}
	require.NoError(t, pub.Flush(ctx))
	var last uint64
	for i, r := range res {
		rec, err := r.Get(ctx)
		if i == 123 {
			assert.ErrorIs(t, err, pevent.ErrInvalid)
			continue
		}
		require.NoError(t, err, "publish %d", i)
		assert.Equal(t, last+1, rec.Seq, "publish %d", i)
		last = rec.Seq
	}
	assert.Equal(t, int64(n-1), cnt.docs.Load(), "each good record inserted once")
	assert.LessOrEqual(t, cnt.n.Load(), int64(n/50+2), "inserts of up to MaxBatch records")
}

// TestGroupCommitBatchBytes checks that MaxBatchBytes bounds the records
// that concurrent appends share in one insert.
func TestGroupCommitBatchBytes(t *testing.T) {
	t.Parallel()
	s, cnt := countedStore(t, func(c *mongostore.Config) { c.MaxBatchBytes = 1 })
	ctx := context.Background()
	const callers = 16
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Append(ctx, "t", []pevent.Record{rec("t", string(rune('a'+i)))})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(callers), cnt.n.Load(), "a batch over MaxBatchBytes holds its first append only")
}
