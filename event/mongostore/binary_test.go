package mongostore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// A binary payload is stored as BSON binary with its content type beside
// it; a hand-written document of a binary type with a payload that is not
// binary is refused by name, and the others still read.
func TestBinaryPayloadDocument(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	blob := []byte{0, 0xff, '{'}
	_, err := s.Append(ctx, "t", []event.Record{{ID: "b", TS: 1, Topic: "t", Payload: blob, ContentType: "image/png"}})
	require.NoError(t, err)
	events := s.Database().Collection(mongostore.EventsCollection)
	var doc bson.Raw
	require.NoError(t, events.FindOne(ctx, bson.D{{Key: "topic", Value: "t"}, {Key: "id", Value: "b"}}).Decode(&doc))
	p := doc.Lookup("payload")
	require.Equal(t, bson.TypeBinary, p.Type)
	_, data := p.Binary()
	assert.Equal(t, blob, data)
	assert.Equal(t, "image/png", doc.Lookup("content_type").StringValue())

	_, err = events.InsertOne(ctx, bson.D{
		{Key: "topic", Value: "t"}, {Key: "seq", Value: int64(2)}, {Key: "id", Value: "bad"},
		{Key: "payload", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "content_type", Value: "image/png"},
	})
	require.NoError(t, err)
	_, err = s.FindByID(ctx, "t", "bad")
	require.ErrorIs(t, err, mongostore.ErrBadDocument)
	assert.Contains(t, err.Error(), `"payload"`)
	r, err := s.FindByID(ctx, "t", "b")
	require.NoError(t, err)
	assert.Equal(t, blob, []byte(r.Payload))
}
