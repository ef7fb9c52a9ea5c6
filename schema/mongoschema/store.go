// Package mongoschema is a [schema.Store] in MongoDB: one document per
// (topic, version), keyed by _id "<topic>/<version, 10 digits>", so that
// adding an existing version fails on the _id index whatever the server
// (two processes registering at once: one wins, the other gets
// schema.ErrVersionExists and checks against the winner).
//
//	st, err := mongoschema.New(db, mongoschema.Config{})
//	reg, err := schema.NewRegistry(ctx, schema.Config{Store: st})
package mongoschema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/promethean/promlib/schema"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// DefaultCollection is the collection of the versions.
const DefaultCollection = "schemas"

// Config configures a [Store]; the zero value is the default.
type Config struct {
	// Collection is the collection's name (default "schemas").
	Collection string
}

// Store is a [schema.Store] in a MongoDB collection.
type Store struct {
	c *mongo.Collection
}

var _ schema.Store = (*Store)(nil)

// New returns a Store in db. It needs no index beyond _id.
func New(db *mongo.Database, cfg Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: db: nil", schema.ErrInvalid)
	}
	if cfg.Collection == "" {
		cfg.Collection = DefaultCollection
	}
	return &Store{c: db.Collection(cfg.Collection)}, nil
}

type doc struct {
	ID      string    `bson:"_id"`
	Topic   string    `bson:"topic"`
	Version int       `bson:"version"`
	Schema  string    `bson:"schema"`
	Rule    string    `bson:"rule"`
	Created time.Time `bson:"created"`
}

func docID(topic string, version int) string { return fmt.Sprintf("%s/%010d", topic, version) }

// Add implements [schema.Store].
func (s *Store) Add(ctx context.Context, v schema.Version) error {
	_, err := s.c.InsertOne(ctx, doc{
		ID: docID(v.Topic, v.Version), Topic: v.Topic, Version: v.Version,
		Schema: string(v.Schema), Rule: string(v.Rule), Created: v.Created.UTC(),
	})
	if mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("%w: %s v%d", schema.ErrVersionExists, v.Topic, v.Version)
	}
	if err != nil {
		return fmt.Errorf("mongoschema: add %s v%d: %w", v.Topic, v.Version, err)
	}
	return nil
}

// Versions implements [schema.Store]. Topic names hold no '/', and '0'
// follows '/', so the _id range [topic+"/", topic+"0") is the topic's.
func (s *Store) Versions(ctx context.Context, topic string) ([]schema.Version, error) {
	return s.find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: topic + "/"}, {Key: "$lt", Value: topic + "0"}}}})
}

// All implements [schema.Store].
func (s *Store) All(ctx context.Context) ([]schema.Version, error) {
	return s.find(ctx, bson.D{})
}

func (s *Store) find(ctx context.Context, filter bson.D) ([]schema.Version, error) {
	cur, err := s.c.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("mongoschema: find: %w", err)
	}
	var docs []doc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongoschema: read: %w", err)
	}
	out := make([]schema.Version, 0, len(docs))
	for _, d := range docs {
		if !json.Valid([]byte(d.Schema)) {
			return nil, errors.New("mongoschema: document " + d.ID + ": schema is not JSON")
		}
		out = append(out, schema.Version{
			Topic: d.Topic, Version: d.Version, Schema: json.RawMessage(d.Schema),
			Rule: schema.Rule(d.Rule), Created: d.Created.UTC(),
		})
	}
	schema.SortVersions(out)
	return out, nil
}
