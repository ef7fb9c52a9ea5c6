package event_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/promethean/promlib/event"
)

var benchPayload = []byte(`{"i":123456,"p":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)

func BenchmarkPublish(b *testing.B) {
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close(ctx)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		if _, err := bus.Publish(ctx, "bench", benchPayload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPublishParallel(b *testing.B) {
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close(ctx)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := bus.Publish(ctx, "bench", benchPayload); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// deliverAckBus returns a Bus with a subscription of group "g" on topic
// "bench" that acks every delivery, and a channel closed once b.N have
// been delivered.
func deliverAckBus(b *testing.B, opts ...event.SubscribeOption) (*event.Bus, <-chan struct{}) {
	b.Helper()
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close(ctx) })
	var got atomic.Int64
	done := make(chan struct{})
	want := int64(b.N)
	_, err = bus.Subscribe(ctx, "bench", "g", func(ctx context.Context, d *event.Delivery) error {
		if got.Add(1) == want {
			close(done)
		}
		return nil
	}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return bus, done
}

// publishAll publishes b.N events through a Publisher, the i-th with
// the option opt(i) gives (nil: none), and waits until they are stored.
func publishAll(b *testing.B, bus *event.Bus, opt func(i int) event.PublishOption) {
	b.Helper()
	ctx := context.Background()
	pub, err := bus.NewPublisher(event.PublisherConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if opt == nil {
			pub.Publish(ctx, "bench", benchPayload)
		} else {
			pub.Publish(ctx, "bench", benchPayload, opt(i))
		}
	}
	if err := pub.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPublishDeliverAck measures one event end to end: publish,
// delivery to a subscriber, ack. ns/op is per event.
func BenchmarkPublishDeliverAck(b *testing.B) {
	ctx := context.Background()
	bus, done := deliverAckBus(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := bus.Publish(ctx, "bench", benchPayload); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}

// BenchmarkPublisherDeliverAck is BenchmarkPublishDeliverAck with the
// publishes pipelined through a Publisher. ns/op is per event.
func BenchmarkPublisherDeliverAck(b *testing.B) {
	bus, done := deliverAckBus(b)
	publishAll(b, bus, nil)
	<-done
}

// BenchmarkKeyOrderedDeliverAck is BenchmarkPublisherDeliverAck with
// records of 1,000 keys to a key-ordered subscription with 8 handler
// goroutines. ns/op is per event.
func BenchmarkKeyOrderedDeliverAck(b *testing.B) {
	bus, done := deliverAckBus(b, event.WithKeyOrdered(), event.WithConcurrency(8))
	keys := make([]event.PublishOption, 1000)
	for i := range keys {
		keys[i] = event.WithKey("k" + strconv.Itoa(i))
	}
	publishAll(b, bus, func(i int) event.PublishOption { return keys[i%len(keys)] })
	<-done
}
