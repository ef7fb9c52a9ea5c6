package mongotxn_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/txn/mongotxn"
)

func TestMain(m *testing.M) { testmongo.Main(m) }

func TestNewRunnerRejectsNil(t *testing.T) {
	_, err := mongotxn.NewRunner(nil)
	assert.ErrorIs(t, err, mongotxn.ErrInvalid)
	assert.ErrorContains(t, err, "client")
}

// InTx commits fn's writes when it returns nil and rolls them back when
// it fails; an InTx inside it joins the outer transaction.
func TestInTx(t *testing.T) {
	db := testmongo.DB(t)
	testmongo.RequireTransactions(t, db)
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
