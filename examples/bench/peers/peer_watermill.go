package main

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
)

// runWatermill publishes through Watermill's GoChannel to one subscriber
// that acks every message.
func runWatermill(ctx context.Context, n, payload, window int, t *tally) error {
	pubsub := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: int64(window)}, watermill.NopLogger{})
	msgs, err := pubsub.Subscribe(ctx, "bench.events")
	if err != nil {
		return err
	}
	go func() {
		for m := range msgs {
			t.delivered(payloadIndex(m.Payload))
			m.Ack()
		}
	}()
	go func() {
		<-t.done
		_ = pubsub.Close()
	}()
	for i := range n {
		p := makePayload(i, payload)
		t.published(i)
		if err := pubsub.Publish("bench.events", message.NewMessage(watermill.NewUUID(), p)); err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
	}
	return nil
}
