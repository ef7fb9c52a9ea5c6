package mongooutbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/mongooutbox"
	"github.com/promethean/promlib/outbox/outboxtest"
)

func TestMain(m *testing.M) { testmongo.Main(m) }

func newStore(t testing.TB, c clock.Clock) *mongooutbox.Store {
	t.Helper()
	s, err := mongooutbox.New(testmongo.DB(t), mongooutbox.Config{Clock: c})
	require.NoError(t, err)
	_, err = s.EnsureIndexes(context.Background())
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T, c clock.Clock) outboxtest.Store { return newStore(t, c) }, outboxtest.Options{Server: true})
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := mongooutbox.New(nil, mongooutbox.Config{})
	assert.ErrorIs(t, err, outbox.ErrInvalid)
}

// BenchmarkDrainer measures how many rows a drainer publishes per second
// from MongoDB, and a plain InsertMany of the same documents on the same
// server, the ceiling a drainer's writes compare against:
//
//	tools/mongotest/with-mongo.sh go test -run '^$' -bench Drainer -benchtime 2000x ./outbox/mongooutbox/
func BenchmarkDrainer(b *testing.B) {
	outboxtest.Bench(b, func(b *testing.B) outbox.Store { return newStore(b, nil) })
	b.ReportMetric(rawInsertPerS(b, b.N), "raw_insert_rows/s")
}

// rawInsertPerS inserts n outbox-shaped documents with InsertMany in
// batches of 500 and returns documents per second.
func rawInsertPerS(b *testing.B, n int) float64 {
	coll := testmongo.DB(b).Collection("raw")
	ctx := context.Background()
	start := time.Now()
	docs := make([]any, 0, 500)
	for i := 0; i < n; i++ {
		docs = append(docs, bson.D{
			{Key: "_id", Value: fmt.Sprint("raw-", i)}, {Key: "order", Value: bson.NewObjectID()}, {Key: "topic", Value: "bench"},
			{Key: "payload", Value: `{"i":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`}, {Key: "status", Value: "pending"},
		})
		if len(docs) == cap(docs) || i == n-1 {
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				b.Fatal(err)
			}
			docs = docs[:0]
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// EnsureIndexes may run again, with another retention: the TTL index's
// expiry changes (where the server has TTL indexes), and without TTL
// indexes sent_at gets a plain index for the drainer's deletes.
func TestEnsureIndexesAgainWithAnotherRetention(t *testing.T) {
	db := testmongo.DB(t)
	ctx := context.Background()
	// indexes returns the collection's index names, each with its TTL
	// expiry in seconds ("" without one).
	indexes := func() map[string]string {
		t.Helper()
		specs, err := db.Collection("outbox").Indexes().ListSpecifications(ctx)
		require.NoError(t, err)
		out := map[string]string{}
		for _, sp := range specs {
			out[sp.Name] = ""
			if sp.ExpireAfterSeconds != nil {
				out[sp.Name] = fmt.Sprint(*sp.ExpireAfterSeconds)
			}
		}
		return out
	}
	var ttls []bool
	for _, retention := range []time.Duration{time.Hour, 2 * time.Hour} {
		s, err := mongooutbox.New(db, mongooutbox.Config{Retention: retention})
		require.NoError(t, err)
		ttl, err := s.EnsureIndexes(ctx)
		require.NoError(t, err)
		ttls = append(ttls, ttl)
		got := indexes()
		assert.Contains(t, got, "status_order")
		if ttl {
			assert.Equal(t, fmt.Sprint(int(retention.Seconds())), got["sent_at_ttl"])
		} else {
			assert.Contains(t, got, "sent_at", "the drainer's index, on a server without TTL indexes")
		}
	}
	assert.Equal(t, ttls[0], ttls[1])
	t.Logf("server has TTL indexes: %v", ttls[0])
}
