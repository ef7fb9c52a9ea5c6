package mongotable_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/projector/internal/changelogtest"
	"github.com/promethean/promlib/projector/mongotable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func TestMain(m *testing.M) { testmongo.Main(m) }

// readTable returns the rows of the table as key -> compact JSON value.
func readTable(t *testing.T, c *mongo.Collection) map[string]string {
	t.Helper()
	cur, err := c.Find(context.Background(), bson.D{})
	require.NoError(t, err)
	var docs []struct {
		ID    string `bson:"_id"`
		Seq   int64  `bson:"seq"`
		Value bson.M `bson:"value"`
	}
	require.NoError(t, cur.All(context.Background(), &docs))
	out := map[string]string{}
	for _, d := range docs {
		b, err := json.Marshal(d.Value)
		require.NoError(t, err)
		out[d.ID] = string(b)
	}
	return out
}

// TestTableEqualsModelThroughCrashes runs the changelog tables' test
// (changelogtest.Run): random puts and tombstones while the writer crashes
// before a write, after its tombstones or after half its rows; the table
// equals the latest value per key after every round and after a rebuild.
func TestTableEqualsModelThroughCrashes(t *testing.T) {
	t.Parallel()
	db := testmongo.DB(t)
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{Partitions: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bus.Close(context.Background()) })
	changelogtest.Run(t, bus, changelogtest.Harness{
		New: func(t *testing.T, bus *event.Bus, batch int, fail func(int) error, opts ...event.SubscribeOption) changelogtest.Table {
			tbl, err := mongotable.New(mongotable.Config{
				Bus: bus, Topic: changelogtest.Topic, DB: db, Collection: "accounts", BatchSize: batch, Subscribe: opts,
			})
			require.NoError(t, err)
			if fail != nil {
				tbl.SetFail(fail)
			}
			return tbl
		},
		Read: func(t *testing.T) map[string]string { return readTable(t, db.Collection("accounts")) },
		AddStray: func(t *testing.T) {
			_, err := db.Collection("accounts").InsertOne(context.Background(), bson.D{{Key: "_id", Value: "stray"}, {Key: "seq", Value: int64(1 << 40)}})
			require.NoError(t, err)
		},
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := mongotable.New(mongotable.Config{Topic: "bad topic", BatchSize: -1})
	require.ErrorIs(t, err, mongotable.ErrInvalid)
	for _, field := range []string{"Bus", "DB", "Collection", "BatchSize", "topic"} {
		assert.Contains(t, err.Error(), field)
	}
}
