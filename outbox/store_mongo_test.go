package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/outbox"
)

// Add writes in the caller's transaction: rows appear with the caller's
// own writes when it commits, and not at all when it aborts.
func TestMongoAddInTransaction(t *testing.T) {
	db := testmongo.DB(t)
	testmongo.RequireTransactions(t, db)
	ctx := context.Background()
	ob, err := outbox.NewMongoStore(db, outbox.MongoConfig{})
	require.NoError(t, err)
	require.NoError(t, ob.EnsureIndexes(ctx))
	orders := db.Collection("orders")
	sess, err := db.Client().StartSession()
	require.NoError(t, err)
	defer sess.EndSession(ctx)

	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: "o-1"}}); err != nil {
			return nil, err
		}
		return nil, ob.Add(ctx, outbox.Message{ID: "ev-1", Topic: "order.created", Payload: []byte(`{"id":"o-1"}`)})
	})
	require.NoError(t, err)

	errAbort := errors.New("abort")
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: "o-2"}}); err != nil {
			return nil, err
		}
		if err := ob.Add(ctx, outbox.Message{ID: "ev-2", Topic: "order.created", Payload: []byte(`{"id":"o-2"}`)}); err != nil {
			return nil, err
		}
		return nil, errAbort
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

func TestMongoStoreRejectsBadConfig(t *testing.T) {
	_, err := outbox.NewMongoStore(nil, outbox.MongoConfig{})
	assert.ErrorIs(t, err, outbox.ErrInvalid)
}
