package mongodedupe_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/dedupetest"
	"github.com/promethean/promlib/dedupe/mongodedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/txn/mongotxn"
)

func TestMain(m *testing.M) { testmongo.Main(m) }

func newStore(t *testing.T) *mongodedupe.Store {
	t.Helper()
	s, err := mongodedupe.New(testmongo.DB(t), mongodedupe.Config{})
	require.NoError(t, err)
	_, err = s.EnsureIndexes(context.Background())
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	dedupetest.Run(t, func(t *testing.T) dedupe.Store { return newStore(t) }, dedupetest.Options{Server: true})
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := mongodedupe.New(nil, mongodedupe.Config{})
	assert.ErrorIs(t, err, dedupe.ErrInvalid)
}

// Where the server has TTL indexes, expired keys disappear without a reaper.
func TestMongoTTLIndex(t *testing.T) {
	db := testmongo.DB(t)
	s, err := mongodedupe.New(db, mongodedupe.Config{})
	require.NoError(t, err)
	ttl, err := s.EnsureIndexes(context.Background())
	require.NoError(t, err)
	if !ttl {
		t.Skip("server has no TTL indexes: expired keys are filtered out and reaped (TestConformance/ExpiredKeysAreNotSeen)")
	}
	ctx := context.Background()
	_, err = s.Claim(ctx, "k", "o", time.Second)
	require.NoError(t, err)
	// The server's TTL monitor runs every 60s.
	require.Eventually(t, func() bool {
		n, err := db.Collection("dedupe").CountDocuments(ctx, bson.D{})
		return err == nil && n == 0
	}, 3*time.Minute, time.Second)
}

// With transactions, the handler's writes and the dedupe mark commit
// together: under redeliveries and concurrent subscribers each id's write
// happens once.
func TestSubscribeExactlyOnceTx(t *testing.T) {
	db := testmongo.DB(t)
	testmongo.RequireTransactions(t, db)
	ctx := context.Background()
	s := newStore(t)
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	effects := db.Collection("effects")
	var mu sync.Mutex
	runs := 0
	h := func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		runs++
		mu.Unlock()
		_, err := effects.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.ID}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, optsUpsert())
		return err
	}
	opts := dedupe.Options{Subscribe: []event.SubscribeOption{event.FromEarliest(), event.WithConcurrency(4)}}
	tx, err := mongotxn.NewRunner(db.Client())
	require.NoError(t, err)
	for range 3 {
		_, err := dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
			Bus: bus, Topic: "t", Group: "g", Store: s, Tx: tx, Handler: h, Options: opts,
		})
		require.NoError(t, err)
	}
	const n = 300
	for i := range n {
		_, err := bus.Publish(ctx, "t", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		c, err := bus.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == n
	}, time.Minute, 10*time.Millisecond)
	cur, err := effects.Find(ctx, bson.D{})
	require.NoError(t, err)
	var docs []struct {
		ID string `bson:"_id"`
		N  int    `bson:"n"`
	}
	require.NoError(t, cur.All(ctx, &docs))
	require.Len(t, docs, n)
	for _, d := range docs {
		assert.Equal(t, 1, d.N, "id %s", d.ID)
	}
}

func optsUpsert() *options.UpdateOneOptionsBuilder { return options.UpdateOne().SetUpsert(true) }
