package outbox_test

import (
	"context"
	"fmt"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
)

// A message added to the outbox reaches the bus through the drainer.
func Example() {
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		panic(err)
	}
	defer bus.Close(ctx)
	store := outbox.NewMemoryStore()
	drainer, err := outbox.NewDrainer(outbox.Config{Store: store, Bus: bus})
	if err != nil {
		panic(err)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- drainer.Run(dctx) }()
	defer func() { stop(); <-done }()

	got := make(chan string, 1)
	_, err = bus.Subscribe(ctx, "order.created", "mailer", func(ctx context.Context, d *event.Delivery) error {
		got <- d.ID + " " + string(d.Payload)
		return nil
	}, event.FromEarliest())
	if err != nil {
		panic(err)
	}
	if err := store.Add(ctx, outbox.Message{ID: "o-1", Topic: "order.created", Payload: []byte(`{"id":"o-1"}`)}); err != nil {
		panic(err)
	}
	fmt.Println(<-got)
	// Output: o-1 {"id":"o-1"}
}
