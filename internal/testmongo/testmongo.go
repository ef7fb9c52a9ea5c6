package testmongo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.uber.org/goleak"
)

var (
	once      sync.Once
	shared    *mongo.Client
	sharedErr error
)

// URL returns MONGO_URL, or skips (fails under CI=true) without it.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("MONGO_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MONGO_URL not set: the Mongo tests need a server (make test starts one)")
		}
		t.Skip("MONGO_URL not set: run the tests with make test, or set MONGO_URL")
	}
	return u
}

// Client returns a client of the server at MONGO_URL, shared by the test
// binary; Disconnect it in TestMain with [Close].
func Client(t testing.TB) *mongo.Client {
	t.Helper()
	u := URL(t)
	once.Do(func() {
		c, err := mongo.Connect(options.Client().ApplyURI(u).
			SetServerSelectionTimeout(30 * time.Second).SetMaxPoolSize(100))
		if err != nil {
			sharedErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Ping(ctx, readpref.Primary()); err != nil {
			_ = c.Disconnect(ctx)
			sharedErr = err
			return
		}
		shared = c
	})
	if sharedErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MONGO_URL unreachable: %v", sharedErr)
		}
		t.Skipf("MONGO_URL unreachable: %v", sharedErr)
	}
	return shared
}

// Close disconnects the shared client, if any.
func Close() {
	if shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shared.Disconnect(ctx)
	}
}

// DB returns a new, empty database, dropped when the test ends.
func DB(t testing.TB) *mongo.Database {
	t.Helper()
	c := Client(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	db := c.Database("promlib_test_" + hex.EncodeToString(b))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.Drop(ctx)
	})
	return db
}

// RequireTransactions skips the test when the server does not support
// multi-document transactions (a standalone server, or the bundled test
// server), printing the server's reason; it skips under CI=true too,
// since CI's server need not be a replica set. Keep it to the one test
// that needs a replica set (mongotxn's TestTransactions).
func RequireTransactions(t testing.TB, db *mongo.Database) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := db.Client().StartSession()
	if err != nil {
		t.Skipf("needs a replica set: the server has no sessions, so no transactions: %v", err)
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		_, err := db.Collection("txn_probe").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
		return nil, err
	})
	if err != nil {
		t.Skipf("needs a replica set: the server refused a transaction: %v", err)
	}
}

// IsNotImplemented reports whether err says the server lacks a feature.
func IsNotImplemented(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code == 238 || ce.Code == 115 || ce.Code == 20 || strings.Contains(ce.Message, "not implemented")
	}
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "not implemented")
}

// Main runs a test binary's tests, disconnects the shared client and then
// checks that no goroutine leaked; use it as TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
