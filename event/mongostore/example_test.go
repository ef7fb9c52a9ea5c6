package mongostore_test

import (
	"context"
	"log"
	"os"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// A bus over MongoDB: every process that opens the same database shares
// the topics, and the partitions of each consumer group are leased among
// the processes. It needs a server, so it is compiled, not run.
func Example() {
	ctx := context.Background()
	store, err := mongostore.Connect(ctx, os.Getenv("MONGO_URL"), mongostore.Config{Database: "app"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)
	// Once per database: the unique indexes are part of the correctness.
	if err := store.EnsureIndexes(ctx); err != nil {
		log.Fatal(err)
	}
	bus, err := event.NewBus(store, event.Config{Partitions: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close(ctx)

	sub, err := bus.Subscribe(ctx, "orders.created", "billing", func(ctx context.Context, d *event.Delivery) error {
		log.Printf("order %s", d.Payload)
		return nil
	}, event.FromEarliest())
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	if _, err := event.PublishJSON(ctx, bus, "orders.created", map[string]any{"id": 7}, event.WithKey("7")); err != nil {
		log.Fatal(err)
	}
}

// New takes a client the service already has (one that the outbox and
// the transactions share); Close leaves the client connected. Compiled,
// not run.
func ExampleNew() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv("MONGO_URL")))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	store, err := mongostore.New(client, mongostore.Config{Database: "app", CollectionPrefix: "bus_"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)
	if err := store.EnsureIndexes(ctx); err != nil {
		log.Fatal(err)
	}
}
