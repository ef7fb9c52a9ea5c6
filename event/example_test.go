package event_test

import (
	"context"
	"fmt"

	"github.com/promethean/promlib/event"
)

func Example() {
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		panic(err)
	}
	defer bus.Close(ctx)

	done := make(chan struct{})
	_, err = bus.Subscribe(ctx, "heartbeat.received", "ops", func(ctx context.Context, d *event.Delivery) error {
		fmt.Printf("seq %d attempt %d: %s\n", d.Seq, d.Attempt, d.Payload)
		close(done)
		return nil // acks
	}, event.FromEarliest())
	if err != nil {
		panic(err)
	}
	if _, err := bus.Publish(ctx, "heartbeat.received", []byte(`{"pid":42}`)); err != nil {
		panic(err)
	}
	<-done
	// Output: seq 1 attempt 1: {"pid":42}
}

func ExampleBus_Subscribe_manualAck() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)

	deliveries := make(chan *event.Delivery, 1)
	_, _ = bus.Subscribe(ctx, "jobs", "workers", func(ctx context.Context, d *event.Delivery) error {
		deliveries <- d // hand over; settle later
		return nil
	}, event.WithManualAck(), event.FromEarliest())
	_, _ = bus.Publish(ctx, "jobs", []byte(`"resize"`))

	d := <-deliveries
	fmt.Println(d.Ack(ctx))
	fmt.Println(d.Ack(ctx) != nil) // settled once only
	// Output:
	// <nil>
	// true
}

func ExamplePublishJSON() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)

	type order struct {
		ID    string  `json:"id"`
		Total float64 `json:"total"`
	}
	rec, _ := event.PublishJSON(ctx, bus, "orders", order{"o-1", 9.5}, event.WithKey("o-1"))
	back, _ := event.Decode[order](&rec)
	fmt.Println(rec.Seq, rec.Key, back.Total)
	// Output: 1 o-1 9.5
}

func ExamplePublisher() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)

	// Up to 256 publishes in flight; the store writes them in batches.
	pub, _ := bus.NewPublisher(event.PublisherConfig{MaxPending: 256})
	var results []*event.PublishFuture
	for i := range 3 {
		results = append(results, pub.Publish(ctx, "meters", fmt.Appendf(nil, `{"reading":%d}`, i)))
	}
	results = append(results, pub.Publish(ctx, "meters", []byte(`{oops`)))
	if err := pub.Flush(ctx); err != nil {
		panic(err)
	}
	for _, r := range results {
		rec, err := r.Get(ctx)
		fmt.Println(rec.Seq, err != nil)
	}
	// Output:
	// 1 false
	// 2 false
	// 3 false
	// 0 true
}
