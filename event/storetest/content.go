package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testBinaryPayloads checks that records of binary and text content types
// come back byte for byte with their content type, beside JSON records
// that have none.
func testBinaryPayloads(t *testing.T, s event.Store) {
	ctx := context.Background()
	bin := []byte{0x00, 0xff, 0xfe, '{', 0x80, '"', 0x00}
	in := []event.Record{
		{ID: "bin", TS: 1, Topic: "t", Payload: bin, ContentType: event.ContentTypeBinary, Key: "k"},
		{ID: "empty", TS: 2, Topic: "t", Payload: nil, ContentType: "image/png"},
		{ID: "text", TS: 3, Topic: "t", Payload: []byte("plain, not JSON"), ContentType: "text/plain; charset=utf-8"},
		{ID: "utf8-bin", TS: 4, Topic: "t", Payload: []byte(`{"looks":"like JSON"}`), ContentType: "application/x-protobuf"},
		rec("t", "json", 5, `{"a":1}`),
	}
	out, err := s.Append(ctx, "t", in)
	require.NoError(t, err)
	require.Len(t, out, len(in))
	got, err := s.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, len(in))
	for i, r := range got {
		assert.Equal(t, in[i].ID, r.ID)
		assert.Equal(t, in[i].ContentType, r.ContentType, "record %s", r.ID)
		assert.Equal(t, string(in[i].Payload), string(r.Payload), "record %s", r.ID)
	}
	assert.True(t, got[0].IsBinary())
	assert.False(t, got[4].IsBinary())
	one, err := s.FindByID(ctx, "t", "bin")
	require.NoError(t, err)
	assert.Equal(t, bin, []byte(one.Payload))
	assert.Equal(t, event.ContentTypeBinary, one.ContentType)
	if ks, ok := s.(event.KeyStore); ok {
		latest, err := ks.LatestByKey(ctx, "t", []string{"k"})
		require.NoError(t, err)
		assert.Equal(t, bin, []byte(latest["k"].Payload))
		assert.Equal(t, event.ContentTypeBinary, latest["k"].ContentType)
	}
}

// testBinaryThroughBus publishes a binary payload through a Bus, delivers
// it, and dead-letters it with its content type.
func testBinaryThroughBus(t *testing.T, s event.Store) {
	b, ft := newFakeBus(t, s)
	bin := []byte{0xde, 0xad, 0xbe, 0xef}
	c := newCollector()
	subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		c.add(d)
		return assert.AnError
	}, event.FromEarliest(), event.WithMaxAttempts(1), event.WithBackoff(time.Millisecond, time.Millisecond))
	dl := newCollector()
	subscribe(t, b, event.DeadLetterTopic("t"), "inspect", dl.handler, event.FromEarliest())
	_, err := b.Publish(context.Background(), "t", []byte("not json"), event.WithContentType("application/json"))
	require.ErrorIs(t, err, event.ErrBadJSON, "a JSON content type keeps the JSON check")
	_, err = b.Publish(context.Background(), "t", []byte{0xff}, event.WithContentType("text/plain"))
	require.ErrorIs(t, err, event.ErrBadJSON, "a text content type keeps the UTF-8 check")
	_, err = b.Publish(context.Background(), "t", bin, event.WithContentType("no slash"))
	require.ErrorIs(t, err, event.ErrInvalid)
	_, err = b.Publish(context.Background(), "t", bin, event.WithContentType(event.ContentTypeBinary))
	require.NoError(t, err)
	ft.eventually(time.Millisecond, func() bool { return dl.len() == 1 })
	d := c.snapshot()[0]
	assert.Equal(t, bin, []byte(d.Payload))
	assert.Equal(t, event.ContentTypeBinary, d.ContentType)
	x := dl.snapshot()[0]
	assert.Equal(t, bin, []byte(x.Payload))
	assert.Equal(t, event.ContentTypeBinary, x.ContentType)
	head, err := s.Head(context.Background(), "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), head, "refused publishes stored nothing")
}
