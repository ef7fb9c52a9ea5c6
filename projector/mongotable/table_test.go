package mongotable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/projector/mongotable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func TestMain(m *testing.M) { testmongo.Main(m) }

var errCrash = errors.New("crash")

// model is the latest payload per key; a tombstone removes the key.
type model map[string]string

func (m model) apply(key, payload string) {
	if payload == "null" {
		delete(m, key)
	} else {
		m[key] = payload
	}
}

// readTable returns the rows of the table as key -> compact JSON value.
func readTable(t *testing.T, c *mongo.Collection) model {
	t.Helper()
	cur, err := c.Find(context.Background(), bson.D{})
	require.NoError(t, err)
	var docs []struct {
		ID    string `bson:"_id"`
		Seq   int64  `bson:"seq"`
		Value bson.M `bson:"value"`
	}
	require.NoError(t, cur.All(context.Background(), &docs))
	out := model{}
	for _, d := range docs {
		b, err := json.Marshal(d.Value)
		require.NoError(t, err)
		out[d.ID] = string(b)
	}
	return out
}

// publishRandom publishes n random puts and tombstones over keys and
// returns the model of what it published.
func publishRandom(t *testing.T, rng *rand.Rand, bus *event.Bus, topic string, keys, n int, m model) {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("k%d", rng.IntN(keys))
		payload := fmt.Sprintf(`{"i":%d}`, i)
		if rng.IntN(4) == 0 {
			payload = "null"
		}
		_, err := bus.Publish(context.Background(), topic, []byte(payload), event.WithKey(key))
		require.NoError(t, err)
		m.apply(key, payload)
	}
}

// TestTableEqualsModelThroughCrashes publishes random puts and tombstones
// while the table's writer crashes at random points of random batches
// (before a write, after its tombstones, after half its rows); each crash
// leaves the batch unacked, a new Table of the same group takes over and
// gets the batch again. After every round the table equals the latest
// value per key.
func TestTableEqualsModelThroughCrashes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testmongo.DB(t)
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{Partitions: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bus.Close(context.Background()) })
	rng := rand.New(rand.NewPCG(2, 19))
	m := model{}
	totalCrashes := 0
	for round := range 4 {
		publishRandom(t, rng, bus, "accounts", 12, 60, m)
		crashes := 0
		for {
			tbl, err := mongotable.New(mongotable.Config{
				Bus: bus, Topic: "accounts", DB: db, Collection: "accounts", BatchSize: 8,
				Subscribe: []event.SubscribeOption{event.WithBackoff(time.Millisecond, time.Millisecond)},
			})
			require.NoError(t, err)
			var writes atomic.Int32
			crashAt := int32(rng.IntN(6))
			point := rng.IntN(3)
			if crashes >= 3 {
				crashAt = -1
			}
			tbl.SetFail(func(p int) error {
				if p == point && writes.Add(1)-1 == crashAt {
					return errCrash
				}
				return nil
			})
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- tbl.Run(rctx) }()
			var runErr error
			caught := func() bool {
				select {
				case runErr = <-done:
					return true
				default:
				}
				lag, err := tbl.Lag(ctx)
				return err == nil && lag.Lag == 0
			}
			require.Eventually(t, caught, 60*time.Second, 5*time.Millisecond, "round %d", round)
			cancel()
			if runErr == nil {
				runErr = <-done
			}
			if errors.Is(runErr, errCrash) {
				crashes++
				totalCrashes++
				continue
			}
			require.ErrorIs(t, runErr, context.Canceled)
			break
		}
		assert.Equal(t, m, readTable(t, db.Collection("accounts")), "round %d after %d crashes", round, crashes)
	}

	assert.Positive(t, totalCrashes, "no batch crashed: the test proved nothing about redeliveries")

	// Rebuild from the first event gives the same table.
	tbl, err := mongotable.New(mongotable.Config{Bus: bus, Topic: "accounts", DB: db, Collection: "accounts"})
	require.NoError(t, err)
	_, err = db.Collection("accounts").InsertOne(ctx, bson.D{{Key: "_id", Value: "stray"}, {Key: "seq", Value: int64(1 << 40)}})
	require.NoError(t, err)
	require.NoError(t, tbl.Rebuild(ctx))
	assert.Equal(t, m, readTable(t, db.Collection("accounts")), "rebuilt")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := mongotable.New(mongotable.Config{Topic: "bad topic", BatchSize: -1})
	require.ErrorIs(t, err, mongotable.ErrInvalid)
	for _, field := range []string{"Bus", "DB", "Collection", "BatchSize", "topic"} {
		assert.Contains(t, err.Error(), field)
	}
}
