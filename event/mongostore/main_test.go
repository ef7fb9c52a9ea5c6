package mongostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/event/storetest"
	"github.com/promethean/promlib/internal/testmongo"
)

func TestMain(m *testing.M) {
	storetest.HelperMain(openShared)
	testmongo.Main(m)
}

// mongoURL returns MONGO_URL; see [testmongo.URL].
func mongoURL(t testing.TB) string { return testmongo.URL(t) }

// client returns the client shared by the tests; see [testmongo.Client].
func client(t testing.TB) *mongo.Client { return testmongo.Client(t) }

// testDB returns the name of a new database, dropped when the test ends.
func testDB(t testing.TB) string { return testmongo.DB(t).Name() }

// newStore returns a store in a fresh database with its indexes, closed and
// dropped when the test ends.
func newStore(t testing.TB, mod ...func(*mongostore.Config)) *mongostore.Store {
	t.Helper()
	var m func(*mongostore.Config)
	if len(mod) > 0 {
		m = mod[0]
	}
	return newStoreIn(t, testDB(t), m)
}

// newStoreIn returns a store in database db, closed when the test ends.
func newStoreIn(t testing.TB, db string, mod func(*mongostore.Config)) *mongostore.Store {
	t.Helper()
	cfg := mongostore.Config{Database: db, PollInterval: 50 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	s, err := mongostore.New(client(t), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.EnsureIndexes(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Close(ctx))
	})
	return s
}
