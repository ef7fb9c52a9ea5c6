package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/outbox"
)

// BenchmarkDrainer measures how many rows a drainer publishes per second:
// b.N rows are added, then drained into an in-memory bus. The mongo case
// also measures a plain InsertMany of the same documents on the same
// server, the ceiling a drainer's writes compare against:
//
//	tools/mongotest/with-mongo.sh go test -run '^$' -bench Drainer -benchtime 2000x ./outbox/
func BenchmarkDrainer(b *testing.B) {
	for name, newStore := range map[string]func(b *testing.B) outbox.Store{
		"memory": func(*testing.B) outbox.Store { return outbox.NewMemoryStore() },
		"mongo": func(b *testing.B) outbox.Store {
			s, err := outbox.NewMongoStore(testmongo.DB(b), outbox.MongoConfig{})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.EnsureIndexes(context.Background()); err != nil {
				b.Fatal(err)
			}
			return s
		},
	} {
		b.Run(name, func(b *testing.B) {
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
			if name == "mongo" {
				b.ReportMetric(rawInsertPerS(b, b.N), "raw_insert_rows/s")
			}
		})
	}
}

// rawInsertPerS inserts n outbox-shaped documents with InsertMany in
// batches of 500 and returns documents per second.
func rawInsertPerS(b *testing.B, n int) float64 {
	coll := testmongo.DB(b).Collection("raw")
	ctx := context.Background()
	start := time.Now()
	docs := make([]any, 0, 500)
	for i := 0; i < n; i++ {
		docs = append(docs, bson.D{
			{Key: "_id", Value: fmt.Sprint("raw-", i)}, {Key: "order", Value: bson.NewObjectID()}, {Key: "topic", Value: "bench"},
			{Key: "payload", Value: `{"i":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`}, {Key: "status", Value: "pending"},
		})
		if len(docs) == cap(docs) || i == n-1 {
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				b.Fatal(err)
			}
			docs = docs[:0]
		}
	}
	return float64(n) / time.Since(start).Seconds()
}
