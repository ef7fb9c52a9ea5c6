package watermill_test

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/promethean/promlib/event"

	wm "github.com/promethean/promlib/contrib/watermill"
)

// A Watermill publisher and subscriber over an in-memory promlib bus.
func Example() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	pub, _ := wm.NewPublisher(bus, wm.Config{})
	sub, _ := wm.NewSubscriber(bus, wm.SubscriberConfig{ConsumerGroup: "billing"})
	defer sub.Close()

	msgs, _ := sub.Subscribe(ctx, "orders")
	m := message.NewMessage("order-1", []byte{0xca, 0xfe})
	m.Metadata.Set("tenant", "acme")
	_ = pub.Publish("orders", m)

	got := <-msgs
	fmt.Printf("%s %x %s\n", got.UUID, []byte(got.Payload), got.Metadata.Get("tenant"))
	got.Ack()
	// Output: order-1 cafe acme
}
