package mongotable_test

import (
	"context"
	"log"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/projector/mongotable"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// A collection "accounts" that holds the latest value of every key of the
// topic "accounts": a row {_id: key, seq, value} per key, removed by a
// tombstone (a null payload). Run blocks; its group's lag is the table's.
func Example() {
	ctx := context.Background()
	var db *mongo.Database // a connected database
	var bus *event.Bus     // any bus
	tbl, err := mongotable.New(mongotable.Config{Bus: bus, Topic: "accounts", DB: db, Collection: "accounts"})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = tbl.Run(ctx) }()
	// Later: replay the topic into a fresh table and swap it in.
	_ = tbl.Rebuild(ctx)
}
