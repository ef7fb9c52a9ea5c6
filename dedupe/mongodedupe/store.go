package mongodedupe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
)

// Config configures a [Store].
type Config struct {
	// Collection holds the keys (default "dedupe").
	Collection string
	// Clock tells the time of claims and expiries; nil means the system
	// clock.
	Clock clock.Clock
}

// Store is a [dedupe.TxStore] in MongoDB: one document per key, with an
// expireAt date. Every query filters on expireAt, so an expired key never
// counts, whether or not it is deleted yet. EnsureIndexes asks for a TTL
// index on expireAt, which makes the server delete expired keys; on
// servers without TTL indexes run [dedupe.RunReaper].
type Store struct {
	keys  *mongo.Collection
	clock clock.Clock
}

var _ dedupe.TxStore = (*Store)(nil)

// New returns a store in db. It does no I/O; call EnsureIndexes once.
func New(db *mongo.Database, cfg Config) (*Store, error) {
	if db == nil {
		return nil, invalid("db", "nil")
	}
	if cfg.Collection == "" {
		cfg.Collection = "dedupe"
	}
	return &Store{keys: db.Collection(cfg.Collection), clock: clock.Or(cfg.Clock)}, nil
}

// EnsureIndexes creates the TTL index on expireAt. It reports whether the
// server accepted it; a server that lacks TTL indexes is no error (expired
// keys are still never seen; RunReaper deletes them).
func (s *Store) EnsureIndexes(ctx context.Context) (ttl bool, err error) {
	_, err = s.keys.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "expireAt", Value: 1}},
		Options: options.Index().SetName("expireAt_ttl").SetExpireAfterSeconds(0),
	})
	if err == nil {
		return true, nil
	}
	// Without TTL support, a plain index still serves the reaper.
	_, err2 := s.keys.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "expireAt", Value: 1}},
		Options: options.Index().SetName("expireAt"),
	})
	if err2 != nil {
		return false, fmt.Errorf("dedupe: create index: %w", errors.Join(err, err2))
	}
	return false, nil
}

// when is the condition expireAt <op> t. It is wrapped in a one-branch
// $or, which means the same to any server. On the bundled test server
// (FerretDB 1.24) a range condition at the top level next to the _id made
// each update decode the whole collection; wrapped, the same update was
// about 20 times cheaper (measured on 2,000 keys: 7 ms against 148 ms).
func when(op string, t time.Time) bson.E {
	return bson.E{Key: "$or", Value: bson.A{bson.D{{Key: "expireAt", Value: bson.D{{Key: op, Value: t}}}}}}
}

type keyDoc struct {
	ID       string    `bson:"_id"`
	Owner    string    `bson:"owner"`
	Done     bool      `bson:"done"`
	ExpireAt time.Time `bson:"expireAt"`
}

// Claim implements [dedupe.Store].
func (s *Store) Claim(ctx context.Context, key, owner string, lease time.Duration) (dedupe.State, error) {
	if err := checkArgs(key, owner); err != nil {
		return 0, err
	}
	taken, held, err := s.take(ctx, key, owner, false, lease)
	switch {
	case err != nil:
		return 0, fmt.Errorf("dedupe: claim %q: %w", key, err)
	case taken:
		return dedupe.Acquired, nil
	case held != nil && held.Done:
		return dedupe.Done, nil
	}
	return dedupe.Busy, nil
}

// Complete implements [dedupe.Store]: as Claim, the owner's claim, live
// or expired, or a key nobody holds (expired, or no document) takes the
// mark.
func (s *Store) Complete(ctx context.Context, key, owner string, ttl time.Duration) error {
	if err := checkArgs(key, owner); err != nil {
		return err
	}
	taken, _, err := s.take(ctx, key, owner, true, ttl)
	switch {
	case err != nil:
		return fmt.Errorf("dedupe: complete %q: %w", key, err)
	case taken:
		return nil
	}
	return fmt.Errorf("%w: key %q by %q", dedupe.ErrNotOwner, key, owner)
}

// take sets key to owner, marked done or not, until now+d, when the key
// is free (no document, or an expired one) or owner's own unfinished
// claim: one conditional update, or an insert when there is no document.
// It reports whether it did, and otherwise the document of the live
// claim or mark that holds the key (nil when the key kept changing under
// it: three tries).
func (s *Store) take(ctx context.Context, key, owner string, done bool, d time.Duration) (bool, *keyDoc, error) {
	for range 3 {
		now := s.clock.Now()
		res, err := s.keys.UpdateOne(ctx, bson.D{
			{Key: "_id", Value: key},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: "expireAt", Value: bson.D{{Key: "$lte", Value: now}}}},
				bson.D{{Key: "owner", Value: owner}, {Key: "done", Value: false}},
			}},
		}, bson.D{{Key: "$set", Value: bson.D{
			{Key: "owner", Value: owner}, {Key: "done", Value: done}, {Key: "expireAt", Value: now.Add(d)},
		}}})
		if err != nil {
			return false, nil, err
		}
		if res.MatchedCount == 1 {
			return true, nil, nil
		}
		_, err = s.keys.InsertOne(ctx, keyDoc{ID: key, Owner: owner, Done: done, ExpireAt: now.Add(d)})
		if err == nil {
			return true, nil, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return false, nil, err
		}
		var held keyDoc
		err = s.keys.FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Decode(&held)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue // deleted meanwhile: try again
		}
		if err != nil {
			return false, nil, err
		}
		if !held.ExpireAt.After(s.clock.Now()) {
			continue // expired meanwhile: try again
		}
		return false, &held, nil
	}
	return false, nil, nil
}

// Release implements [dedupe.Store].
func (s *Store) Release(ctx context.Context, key, owner string) error {
	_, err := s.keys.DeleteOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "owner", Value: owner}, {Key: "done", Value: false}})
	if err != nil {
		return fmt.Errorf("dedupe: release %q: %w", key, err)
	}
	return nil
}

// Seen implements [dedupe.Store].
func (s *Store) Seen(ctx context.Context, key string) (bool, error) {
	err := s.keys.FindOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "done", Value: true}, when("$gt", s.clock.Now())}).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return false, nil
	}
	return false, fmt.Errorf("dedupe: seen %q: %w", key, err)
}

// Reap implements [dedupe.Store].
func (s *Store) Reap(ctx context.Context) (int, error) {
	res, err := s.keys.DeleteMany(ctx, bson.D{{Key: "expireAt", Value: bson.D{{Key: "$lte", Value: s.clock.Now()}}}})
	if err != nil {
		return 0, fmt.Errorf("dedupe: reap: %w", err)
	}
	return int(res.DeletedCount), nil
}

// MarkDone implements [dedupe.TxStore]: in the transaction ctx carries, it
// deletes an expired document of key and inserts key's done mark. A live
// document of key fails the insert with a duplicate key error, which it
// returns wrapping [dedupe.ErrDone].
func (s *Store) MarkDone(ctx context.Context, key, owner string, ttl time.Duration) error {
	if err := checkArgs(key, owner); err != nil {
		return err
	}
	now := s.clock.Now()
	// An expired mark no longer counts: replace it.
	if _, err := s.keys.DeleteOne(ctx, bson.D{{Key: "_id", Value: key}, when("$lte", now)}); err != nil {
		return fmt.Errorf("dedupe: mark %q: %w", key, err)
	}
	_, err := s.keys.InsertOne(ctx, keyDoc{ID: key, Owner: owner, Done: true, ExpireAt: now.Add(ttl)})
	if mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("%w: %q: %w", dedupe.ErrDone, key, err)
	}
	if err != nil {
		return fmt.Errorf("dedupe: mark %q: %w", key, err)
	}
	return nil
}

func checkArgs(key, owner string) error {
	if key == "" {
		return invalid("key", "must not be empty")
	}
	if owner == "" {
		return invalid("owner", "must not be empty")
	}
	return nil
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", dedupe.ErrInvalid, field, fmt.Sprintf(format, args...))
}
