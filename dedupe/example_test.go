package dedupe_test

import (
	"context"
	"fmt"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
)

// Each order is charged once per event id, however often the bus
// delivers it.
func Example() {
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		panic(err)
	}
	defer bus.Close(ctx)
	done := make(chan string, 4)
	_, err = dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{
		Bus: bus, Topic: "orders", Group: "billing", Store: dedupe.NewMemoryStore(),
		Handler: func(ctx context.Context, d *event.Delivery) error {
			done <- "charged " + string(d.Payload)
			return nil
		},
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{event.FromEarliest()}},
	})
	if err != nil {
		panic(err)
	}
	if _, err := bus.Publish(ctx, "orders", []byte(`"o-1"`), event.WithID("o-1")); err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	// Output: charged "o-1"
}
