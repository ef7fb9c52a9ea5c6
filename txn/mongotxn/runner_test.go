package mongotxn_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/mongodedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/mongooutbox"
	"github.com/promethean/promlib/txn/mongotxn"
)

func TestMain(m *testing.M) { testmongo.Main(m) }

func TestNewRunnerRejectsNil(t *testing.T) {
	_, err := mongotxn.NewRunner(nil)
	assert.ErrorIs(t, err, mongotxn.ErrInvalid)
	assert.ErrorContains(t, err, "client")
}

// TestTransactions needs a server with multi-document transactions (a
// replica set): it is the one Mongo test that skips, even under CI=true,
// on a server without them, printing the server's reason. The in-process
// twins of its parts (txn.Memory with the memory outbox and dedupe
// stores) run everywhere.
func TestTransactions(t *testing.T) {
	testmongo.RequireTransactions(t, testmongo.DB(t))
	t.Run("InTx", testInTx)
	t.Run("OutboxAddInTransaction", testOutboxAddInTransaction)
	t.Run("DedupeSubscribeExactlyOnceTx", testDedupeSubscribeExactlyOnceTx)
}

// InTx commits fn's writes when it returns nil and rolls them back when
// it fails; an InTx inside it joins the outer transaction.
func testInTx(t *testing.T) {
	db := testmongo.DB(t)
	ctx := context.Background()
	tx, err := mongotxn.NewRunner(db.Client())
	require.NoError(t, err)
	docs := db.Collection("docs")
	insert := func(ctx context.Context, id string) error {
		_, err := docs.InsertOne(ctx, bson.D{{Key: "_id", Value: id}})
		return err
	}

	require.NoError(t, tx.InTx(ctx, func(ctx context.Context) error {
		assert.True(t, mongotxn.InTransaction(ctx))
		return insert(ctx, "committed")
	}))
	errAbort := errors.New("abort")
	err = tx.InTx(ctx, func(ctx context.Context) error {
		if err := insert(ctx, "outer"); err != nil {
			return err
		}
		if err := tx.InTx(ctx, func(ctx context.Context) error { return insert(ctx, "inner") }); err != nil {
			return err
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	assert.False(t, mongotxn.InTransaction(ctx))

	cur, err := docs.Find(ctx, bson.D{})
	require.NoError(t, err)
	var got []struct {
		ID string `bson:"_id"`
	}
	require.NoError(t, cur.All(ctx, &got))
	require.Len(t, got, 1, "the inner InTx rolled back with the outer one")
	assert.Equal(t, "committed", got[0].ID)
}

// mongooutbox's Add writes in the caller's transaction: rows appear with the caller's
// own writes when it commits, and not at all when it aborts.
func testOutboxAddInTransaction(t *testing.T) {
	db := testmongo.DB(t)
	ctx := context.Background()
	ob, err := mongooutbox.New(db, mongooutbox.Config{})
	require.NoError(t, err)
	_, err = ob.EnsureIndexes(ctx)
	require.NoError(t, err)
	orders := db.Collection("orders")
	tx, err := mongotxn.NewRunner(db.Client())
	require.NoError(t, err)

	err = tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: "o-1"}}); err != nil {
			return err
		}
		return ob.Add(ctx, outbox.Message{ID: "ev-1", Topic: "order.created", Payload: []byte(`{"id":"o-1"}`)})
	})
	require.NoError(t, err)

	errAbort := errors.New("abort")
	err = tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: "o-2"}}); err != nil {
			return err
		}
		if err := ob.Add(ctx, outbox.Message{ID: "ev-2", Topic: "order.created", Payload: []byte(`{"id":"o-2"}`)}); err != nil {
			return err
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)

	st, err := ob.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, outbox.Stats{Pending: 1}, st, "the committed row only")
	_, err = ob.Row(ctx, "ev-2")
	assert.Error(t, err, "the aborted transaction's row is not there")
	n, err := orders.CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}

// With transactions, the handler's writes and mongodedupe's mark commit
// together: under redeliveries and concurrent subscribers each id's write
// happens once.
func testDedupeSubscribeExactlyOnceTx(t *testing.T) {
	db := testmongo.DB(t)
	ctx := context.Background()
	s, err := mongodedupe.New(db, mongodedupe.Config{})
	require.NoError(t, err)
	_, err = s.EnsureIndexes(ctx)
	require.NoError(t, err)
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
