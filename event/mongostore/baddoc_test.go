package mongostore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// TestUndecodableDocument hand-inserts documents that do not decode between
// good ones: consumers get every good record, each bad one lands once in
// the dead-letter topic with its _id and reason, and nothing loops.
func TestUndecodableDocument(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	b, err := event.NewBus(s, event.Config{CommitInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })

	for i := range 3 {
		_, err := b.Publish(ctx, "t", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	events := s.Database().Collection(mongostore.EventsCollection)
	badID := bson.NewObjectID()
	_, err = events.InsertOne(ctx, bson.D{
		{Key: "_id", Value: badID}, {Key: "topic", Value: "t"}, {Key: "seq", Value: int64(4)},
		{Key: "id", Value: 12345}, {Key: "payload", Value: "1"},
	})
	require.NoError(t, err)
	_, err = events.InsertOne(ctx, bson.D{
		{Key: "topic", Value: "t"}, {Key: "seq", Value: int64(5)}, {Key: "id", Value: "bad-json"}, {Key: "payload", Value: "{nope"},
	})
	require.NoError(t, err)
	// Writers go on after the hand-inserted documents.
	for i := 3; i < 6; i++ {
		r, err := b.Publish(ctx, "t", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		assert.Equal(t, uint64(i+3), r.Seq)
	}

	var mu sync.Mutex
	var got []uint64
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		got = append(got, d.Seq)
		mu.Unlock()
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	dlq := make(chan *event.Delivery, 10)
	_, err = b.Subscribe(ctx, "t.dlq", "inspect", func(ctx context.Context, d *event.Delivery) error {
		dlq <- d
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		c, err := b.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == 8
	}, 10*time.Second, 5*time.Millisecond, "the group passes the bad documents")
	mu.Lock()
	assert.Equal(t, []uint64{1, 2, 3, 6, 7, 8}, got)
	mu.Unlock()

	seen := make(map[string]*event.Delivery)
	for len(seen) < 2 {
		select {
		case d := <-dlq:
			seen[d.Headers[event.HeaderDLQSeq]] = d
		case <-time.After(10 * time.Second):
			t.Fatalf("dead-letter records: %d of 2", len(seen))
		}
	}
	d4 := seen["4"]
	require.NotNil(t, d4)
	assert.Contains(t, d4.Headers[mongostore.HeaderDocID], badID.Hex())
	assert.Contains(t, d4.Headers[event.HeaderDLQReason], `field "id"`)
	assert.Equal(t, "t", d4.Headers[event.HeaderDLQTopic])
	assert.Contains(t, string(d4.Payload), badID.Hex(), "the document itself, as extended JSON")
	d5 := seen["5"]
	require.NotNil(t, d5)
	assert.Equal(t, "bad-json", d5.Headers[event.HeaderDLQID])
	assert.Contains(t, d5.Headers[event.HeaderDLQReason], `field "payload"`)

	// Reading again (another group, a restart) dead-letters nothing new.
	s2 := newStoreIn(t, s.Database().Name(), nil)
	page, err := s2.Read(ctx, "t", 0, 100)
	require.NoError(t, err)
	assert.Len(t, page, 6)
	head, err := s.Head(ctx, "t.dlq")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), head, "each bad document is dead-lettered once")

	_, err = s.FindByID(ctx, "t", "bad-json")
	assert.True(t, errors.Is(err, mongostore.ErrBadDocument), "FindByID names the problem: %v", err)
}

// TestBadSeqIsSkipped checks a document whose seq is not an integer: it
// cannot be placed, so it is dead-lettered and skipped without looping.
func TestBadSeqIsSkipped(t *testing.T) {
	t.Parallel()
	s := newStore(t, func(c *mongostore.Config) { c.CacheRecords = -1 })
	ctx := context.Background()
	_, err := s.Append(ctx, "t", []event.Record{rec("t", "a"), rec("t", "b")})
	require.NoError(t, err)
	_, err = s.Database().Collection(mongostore.EventsCollection).InsertOne(ctx,
		bson.D{{Key: "topic", Value: "t"}, {Key: "seq", Value: 1.5}, {Key: "id", Value: "half"}, {Key: "payload", Value: "1"}})
	require.NoError(t, err)
	page, err := s.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, page, 2)
	assert.Equal(t, []uint64{1, 2}, []uint64{page[0].Seq, page[1].Seq})
	page, err = s.Read(ctx, "t", 0, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	page, err = s.Read(ctx, "t", 1, 1)
	require.NoError(t, err, "a page the bad document would fill is filled from after it")
	require.Len(t, page, 1)
	assert.Equal(t, uint64(2), page[0].Seq)
	head, err := s.Head(ctx, "t.dlq")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), head)
}
