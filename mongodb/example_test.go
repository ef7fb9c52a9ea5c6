package mongodb_test

import (
	"context"
	"log"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/mongodb"
	"github.com/promethean/promlib/outbox"
)

// One Open gives the event store, the outbox and the transactions of the
// database: an order and its event commit together (on a replica set),
// and a drainer publishes the event once they have. (It needs a server,
// so it is compiled, not run.)
func Example() {
	ctx := context.Background()
	db, err := mongodb.Open(ctx, mongodb.Config{URL: "mongodb://127.0.0.1:27017/?replicaSet=rs0", Database: "shop"})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close(ctx)
	bus, err := event.NewBus(db.Store(), event.Config{Partitions: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close(ctx)

	drainer, err := outbox.NewDrainer(outbox.Config{Store: db.Outbox(), Bus: bus})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = drainer.Run(ctx) }()

	orders := db.Database().Collection("orders")
	err = db.Txn().InTx(ctx, func(ctx context.Context) error {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: "o-1"}}); err != nil {
			return err
		}
		return db.Outbox().Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":"o-1"}`)})
	})
	if err != nil {
		log.Fatal(err)
	}
}
