package mongooutbox_test

import (
	"context"
	"log"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/mongooutbox"
	"github.com/promethean/promlib/txn/mongotxn"
)

// An order and its event are stored in one transaction; a drainer
// publishes the event to the bus once it commits. (It needs a MongoDB
// replica set, so it is compiled, not run.)
func Example() {
	ctx := context.Background()
	var client *mongo.Client // connected by the application
	var bus *event.Bus       // the application's bus
	db := client.Database("shop")

	store, err := mongooutbox.New(db, mongooutbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.EnsureIndexes(ctx); err != nil {
		log.Fatal(err)
	}
	drainer, err := outbox.NewDrainer(outbox.Config{Store: store, Bus: bus})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = drainer.Run(ctx) }()

	tx, err := mongotxn.NewRunner(client)
	if err != nil {
		log.Fatal(err)
	}
	err = tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := db.Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: "o-1"}}); err != nil {
			return err
		}
		return store.Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":"o-1"}`)})
	})
	if err != nil {
		log.Fatal(err)
	}
	drainer.Notify() // publish now rather than at the next poll
}
