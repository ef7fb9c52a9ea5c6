package mongostore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/event/mongostore"
)

func TestMain(m *testing.M) {
	if helper := os.Getenv(helperEnv); helper != "" {
		os.Exit(runHelper(helper))
	}
	code := m.Run()
	if sharedClient != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = sharedClient.Disconnect(ctx)
		cancel()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	clientOnce   sync.Once
	sharedClient *mongo.Client
	clientErr    error
)

// mongoURL returns MONGO_URL. Without it the test is skipped, except under
// CI=true, where the Mongo tests must run.
func mongoURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("MONGO_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MONGO_URL not set: the Mongo tests need a server (run them with tools/mongotest/with-mongo.sh)")
		}
		t.Skip("MONGO_URL not set: run with tools/mongotest/with-mongo.sh go test ./event/mongostore/")
	}
	return u
}

// client returns a client of the server at MONGO_URL, shared by the tests.
// An unreachable server skips the test, or fails it under CI=true.
func client(t testing.TB) *mongo.Client {
	t.Helper()
	u := mongoURL(t)
	clientOnce.Do(func() {
		c, err := mongo.Connect(options.Client().ApplyURI(u).SetServerSelectionTimeout(5 * time.Second).SetMaxPoolSize(200))
		if err != nil {
			clientErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Ping(ctx, readpref.Primary()); err != nil {
			_ = c.Disconnect(ctx)
			clientErr = err
			return
		}
		sharedClient = c
	})
	if clientErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MONGO_URL %s unreachable: %v", redact(u), clientErr)
		}
		t.Skipf("MONGO_URL %s unreachable: %v", redact(u), clientErr)
	}
	return sharedClient
}

// redact hides credentials of a mongodb URL.
func redact(u string) string {
	if o := options.Client().ApplyURI(u); o.Auth != nil {
		return "(with credentials)"
	}
	return u
}

// testDB returns a new database name, dropped when the test ends.
func testDB(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "promlib_test_" + hex.EncodeToString(b)
	c := client(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Database(name).Drop(ctx)
	})
	return name
}

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
