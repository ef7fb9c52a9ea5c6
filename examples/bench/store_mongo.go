package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/storeurl"
)

// openMongo opens a mongostore in the database cfg names (a new one),
// dropped when the bench ends.
func openMongo(ctx context.Context, loc storeurl.Location, cfg storeurl.Config) (Backend, error) {
	d, err := loc.Open(ctx, cfg)
	if err != nil {
		return Backend{}, err
	}
	db, _ := storeurl.MongoDB(d)
	return Backend{
		Store: d.Store(),
		DB:    d,
		Raw:   func(ctx context.Context, o *Options) (float64, error) { return rawInsert(ctx, db.Database(), o) },
		RawEach: func(ctx context.Context, o *Options) (RawEach, error) {
			return rawInsertOneEach(ctx, db.Database(), o)
		},
		Close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = db.Database().Drop(ctx)
			_ = d.Close(ctx)
		},
	}, nil
}

// rawInsert measures the driver's ceiling on the same server: n documents
// shaped like the store's (same fields, payload size and ids) inserted
// with plain ordered InsertMany calls of mongostore.DefaultMaxBatch
// documents into a collection with the same unique indexes, one call at a
// time, with the store's write concern (majority). It returns inserts per
// second.
func rawInsert(ctx context.Context, db *mongo.Database, o *Options) (float64, error) {
	c, err := rawCollection(ctx, db, "raw_events")
	if err != nil {
		return 0, err
	}
	now := time.Now().UnixMilli()
	start := time.Now()
	for lo := 0; lo < o.N; lo += mongostore.DefaultMaxBatch {
		hi := min(lo+mongostore.DefaultMaxBatch, o.N)
		docs := make([]any, 0, hi-lo)
		for i := lo; i < hi; i++ {
			docs = append(docs, rawDoc(i, now, o))
		}
		if _, err := c.InsertMany(ctx, docs); err != nil {
			return 0, err
		}
	}
	return float64(o.N) / time.Since(start).Seconds(), nil
}

// rawInsertOneEach measures what the -publishers goroutines of a -sync run
// reach without the store: each inserts its share of the n documents (split
// as publishAll splits the events) with one InsertOne per document, with
// the store's write concern, into a collection with the store's unique
// indexes, through the store's client. It returns inserts per second
// (raw_commit_each_per_s).
func rawInsertOneEach(ctx context.Context, db *mongo.Database, o *Options) (RawEach, error) {
	c, err := rawCollection(ctx, db, "raw_each")
	if err != nil {
		return RawEach{}, err
	}
	now := time.Now().UnixMilli()
	return commitEach(o, func(i int) error {
		_, err := c.InsertOne(ctx, rawDoc(i, now, o))
		return err
	})
}

// rawCollection creates the collection name with the indexes of the
// store's events.
func rawCollection(ctx context.Context, db *mongo.Database, name string) (*mongo.Collection, error) {
	c := db.Collection(name)
	for _, m := range []mongo.IndexModel{
		{Keys: bson.D{{Key: "topic", Value: 1}, {Key: "seq", Value: 1}}, Options: options.Index().SetUnique(true)},
		{Keys: bson.D{{Key: "topic", Value: 1}, {Key: "id", Value: 1}}, Options: options.Index().SetUnique(true)},
		{Keys: bson.D{{Key: "topic", Value: 1}, {Key: "key", Value: 1}, {Key: "seq", Value: 1}}},
	} {
		if _, err := c.Indexes().CreateOne(ctx, m); err != nil {
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
	}
	return c, nil
}

// rawDoc returns document i of a raw baseline, shaped like the store's:
// seq i+1, a UUID-shaped id, the payload of event i.
func rawDoc(i int, now int64, o *Options) bson.D {
	seq := int64(i + 1)
	return bson.D{
		{Key: "_id", Value: benchTopic + "/" + strconv.FormatInt(seq, 10)},
		{Key: "topic", Value: benchTopic}, {Key: "seq", Value: seq},
		{Key: "id", Value: fmt.Sprintf("0192d6f0-0000-7000-8000-%012d", i)},
		{Key: "ts", Value: now}, {Key: "partition", Value: int32(0)},
		{Key: "payload", Value: string(makePayload(i, o.Payload))},
	}
}
