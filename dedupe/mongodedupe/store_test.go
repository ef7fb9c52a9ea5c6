package mongodedupe_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/dedupetest"
	"github.com/promethean/promlib/dedupe/mongodedupe"
	"github.com/promethean/promlib/internal/testmongo"
)

func TestMain(m *testing.M) { testmongo.Main(m) }

func newStore(t *testing.T, c clock.Clock) *mongodedupe.Store {
	t.Helper()
	s, err := mongodedupe.New(testmongo.DB(t), mongodedupe.Config{Clock: c})
	require.NoError(t, err)
	_, err = s.EnsureIndexes(context.Background())
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	dedupetest.Run(t, func(t *testing.T) dedupe.Store { return newStore(t, nil) }, dedupetest.Options{
		Server:  true,
		Clocked: func(t *testing.T, c clock.Clock) dedupe.Store { return newStore(t, c) },
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := mongodedupe.New(nil, mongodedupe.Config{})
	assert.ErrorIs(t, err, dedupe.ErrInvalid)
}

// Where the server has TTL indexes, expired keys disappear without a
// reaper; where it has none, EnsureIndexes puts a plain index on
// expireAt for the reaper (TestReaperDeletesExpiredKeys).
func TestMongoTTLIndex(t *testing.T) {
	db := testmongo.DB(t)
	s, err := mongodedupe.New(db, mongodedupe.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	ttl, err := s.EnsureIndexes(ctx)
	require.NoError(t, err)
	if !ttl {
		specs, err := db.Collection("dedupe").Indexes().ListSpecifications(ctx)
		require.NoError(t, err)
		var names []string
		for _, sp := range specs {
			names = append(names, sp.Name)
		}
		assert.Contains(t, names, "expireAt", "the reaper's index, on a server without TTL indexes")
		return
	}
	_, err = s.Claim(ctx, "k", "o", time.Second)
	require.NoError(t, err)
	// The server's TTL monitor runs every 60s.
	require.Eventually(t, func() bool {
		n, err := db.Collection("dedupe").CountDocuments(ctx, bson.D{})
		return err == nil && n == 0
	}, 3*time.Minute, time.Second)
}

// RunReaper deletes expired marks and claims, and only those, on any
// server: the path that bounds the collection where there is no TTL
// index.
func TestReaperDeletesExpiredKeys(t *testing.T) {
	db := testmongo.DB(t)
	ctx := context.Background()
	fk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := mongodedupe.New(db, mongodedupe.Config{Clock: fk})
	require.NoError(t, err)
	_, err = s.EnsureIndexes(ctx)
	require.NoError(t, err)
	for _, k := range []string{"done-short", "done-long"} {
		st, err := s.Claim(ctx, k, "o", time.Minute)
		require.NoError(t, err)
		require.Equal(t, dedupe.Acquired, st)
	}
	require.NoError(t, s.Complete(ctx, "done-short", "o", time.Minute))
	require.NoError(t, s.Complete(ctx, "done-long", "o", time.Hour))
	_, err = s.Claim(ctx, "claimed", "o", time.Minute)
	require.NoError(t, err)
	fk.Advance(2 * time.Minute)

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- dedupe.RunReaper(rctx, s, dedupe.ReaperConfig{Interval: 30 * time.Second, Clock: fk}) }()
	require.NoError(t, fk.WaitTimers(ctx, 1))
	fk.Advance(30 * time.Second)
	keys := db.Collection("dedupe")
	require.Eventually(t, func() bool {
		n, err := keys.CountDocuments(ctx, bson.D{})
		return err == nil && n == 1
	}, 30*time.Second, 50*time.Millisecond, "the reaper deletes the two expired keys")
	cancel()
	require.NoError(t, <-done)
	var left struct {
		ID string `bson:"_id"`
	}
	require.NoError(t, keys.FindOne(ctx, bson.D{}).Decode(&left))
	assert.Equal(t, "done-long", left.ID)
	seen, err := s.Seen(ctx, "done-long")
	require.NoError(t, err)
	assert.True(t, seen)
}
