package mongotxn_test

import (
	"context"
	"log"
	"os"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/mongooutbox"
	"github.com/promethean/promlib/txn/mongotxn"
)

// An order and its outbox row commit together in one MongoDB transaction
// (a replica set is needed for transactions).
func Example() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv("MONGO_URL")))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database("shop")
	ob, err := mongooutbox.New(db, mongooutbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	tx, err := mongotxn.NewRunner(client)
	if err != nil {
		log.Fatal(err)
	}
	err = tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := db.Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			return err
		}
		return ob.Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":1}`)})
	})
	if err != nil {
		log.Fatal(err)
	}
}
