package outboxtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
)

// Bench measures how many rows a drainer publishes per second: b.N rows
// are added to a store made by newStore, then drained into an in-memory
// bus. It reports rows/s.
func Bench(b *testing.B, newStore func(b *testing.B) outbox.Store) {
	ctx := context.Background()
	ob := newStore(b)
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close(ctx)
	batch := make([]outbox.Message, 0, 500)
	for i := 0; i < b.N; i++ {
		batch = append(batch, outbox.Message{Topic: "bench", Key: fmt.Sprint(i % 16), Payload: []byte(`{"i":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)})
		if len(batch) == cap(batch) || i == b.N-1 {
			if err := ob.Add(ctx, batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	d, err := outbox.NewDrainer(outbox.Config{Store: ob, Bus: bus, PollInterval: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { done <- d.Run(dctx) }()
	for {
		st, err := ob.Stats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if st.Sent == int64(b.N) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
}
