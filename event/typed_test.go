package event_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

type heartbeat struct {
	PID  int    `json:"pid"`
	Name string `json:"name"`
}

func TestTypedHelpers(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	got := make(chan heartbeat, 1)
	_, err := event.SubscribeJSON(ctx, b, "hb", "g", func(ctx context.Context, v heartbeat, d *event.Delivery) error {
		got <- v
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	dead := make(chan *event.Delivery, 1)
	_, err = b.Subscribe(ctx, "hb.dlq", "g", func(ctx context.Context, d *event.Delivery) error {
		dead <- d
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)

	r, err := event.PublishJSON(ctx, b, "hb", heartbeat{PID: 7, Name: "stt"}, event.WithKey("stt"))
	require.NoError(t, err)
	assert.Equal(t, "stt", r.Key)
	v, err := event.Decode[heartbeat](&r)
	require.NoError(t, err)
	assert.Equal(t, heartbeat{7, "stt"}, v)
	assert.Equal(t, v, <-got)

	// A payload that does not decode into T is dead-lettered at once.
	bad, err := b.Publish(ctx, "hb", []byte(`{"pid":"seven"}`))
	require.NoError(t, err)
	d := <-dead
	assert.Equal(t, bad.ID, d.Headers[event.HeaderDLQID])
	assert.Equal(t, "1", d.Headers[event.HeaderDLQAttempt])
	assert.Contains(t, d.Headers[event.HeaderDLQReason], "decode")

	_, err = event.PublishJSON(ctx, b, "hb", func() {})
	assert.ErrorIs(t, err, event.ErrInvalid)
	_, err = event.SubscribeJSON[heartbeat](ctx, b, "hb", "g2", nil)
	assert.ErrorIs(t, err, event.ErrInvalid)
}
