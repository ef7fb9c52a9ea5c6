package mongodedupe_test

import (
	"context"
	"log"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/mongodedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/txn/mongotxn"
)

// Each order event credits the customer once: the credit and the
// event's dedupe mark commit in one transaction, so a redelivery finds
// the mark and does not credit again. (It needs a MongoDB replica set, so
// it is compiled, not run.)
func Example() {
	ctx := context.Background()
	var client *mongo.Client // connected by the application
	var bus *event.Bus       // the application's bus
	db := client.Database("shop")

	store, err := mongodedupe.New(db, mongodedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.EnsureIndexes(ctx); err != nil {
		log.Fatal(err)
	}
	tx, err := mongotxn.NewRunner(client)
	if err != nil {
		log.Fatal(err)
	}
	credits := db.Collection("credits")
	_, err = dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
		Bus: bus, Topic: "orders", Group: "credits", Store: store, Tx: tx,
		Handler: func(ctx context.Context, d *event.Delivery) error {
			_, err := credits.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.Key}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
			return err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
}
