package watermill_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"

	wm "github.com/promethean/promlib/contrib/watermill"
)

// Messages are stored as binary records with their UUID as id and their
// metadata as headers; a message the bus refuses fails the whole publish,
// by name, and stores nothing; a nack redelivers with the next attempt.
func TestMessagesAsRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := event.NewMemoryStore()
	bus, err := event.NewBus(store, event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(ctx)) })
	pub, err := wm.NewPublisher(bus, wm.Config{})
	require.NoError(t, err)

	good := message.NewMessage("m-1", []byte{0, 0xff})
	good.Metadata.Set("k", "v")
	bad := message.NewMessage("m-2", []byte("x"))
	bad.Metadata.Set("bad", "\xff")
	err = pub.Publish("t", good, bad)
	require.ErrorIs(t, err, event.ErrInvalid)
	assert.Contains(t, err.Error(), "m-2")
	head, err := store.Head(ctx, "t")
	require.NoError(t, err)
	assert.Zero(t, head, "nothing of a refused publish is stored")

	require.NoError(t, pub.Publish("t", good, good))
	recs, err := store.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1, "a UUID published twice is stored once")
	assert.Equal(t, "m-1", recs[0].ID)
	assert.Equal(t, event.ContentTypeBinary, recs[0].ContentType)
	assert.Equal(t, []byte{0, 0xff}, []byte(recs[0].Payload))
	assert.Equal(t, "v", recs[0].Headers["k"])

	sub, err := wm.NewSubscriber(bus, wm.SubscriberConfig{ConsumerGroup: "g",
		SubscribeOptions: []event.SubscribeOption{event.WithBackoff(time.Millisecond, time.Millisecond)}})
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	msgs, err := sub.Subscribe(sctx, "t")
	require.NoError(t, err)
	m := <-msgs
	m.Nack()
	m = <-msgs
	assert.Equal(t, "m-1", m.UUID)
	assert.Equal(t, "v", m.Metadata.Get("k"))
	m.Ack()
	cancel()
	for range msgs { // closed when the context ends
	}
	require.NoError(t, sub.Close())
	_, err = sub.Subscribe(ctx, "t")
	assert.ErrorIs(t, err, wm.ErrClosed)
	require.NoError(t, pub.Close())
	assert.ErrorIs(t, pub.Publish("t", good), wm.ErrClosed)

	_, err = wm.NewSubscriber(bus, wm.SubscriberConfig{ConsumerGroup: "bad group"})
	assert.ErrorIs(t, err, event.ErrInvalid)
	_, err = wm.NewPublisher(bus, wm.Config{ContentType: "nonsense"})
	assert.ErrorIs(t, err, event.ErrInvalid)
}
