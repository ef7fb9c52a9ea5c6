package mongodb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/mongodb"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/projector/mongotable"
)

// TestMain disconnects the shared client and checks that a closed DB
// leaves no goroutine behind.
func TestMain(m *testing.M) { testmongo.Main(m) }

// TestOpen: one Open on a URL gives the store, the outbox, the dedupe
// store and a changelog table in one database; Close disconnects the
// client it connected. Skipped without MONGO_URL, except under CI=true,
// where it fails.
func TestOpen(t *testing.T) {
	t.Parallel()
	name := testmongo.DB(t).Name() // dropped when the test ends
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := mongodb.Open(ctx, mongodb.Config{URL: testmongo.URL(t), Database: name})
	require.NoError(t, err)
	assert.Equal(t, name, db.Database().Name())
	checkParts(ctx, t, db)
	client := db.Client()
	require.NoError(t, db.Close(ctx))
	require.NoError(t, db.Close(ctx), "Close again returns the first result")
	assert.Error(t, client.Ping(ctx, nil), "Close disconnects the client Open connected")
}

// TestOpenWithClient: with the application's client, Close leaves it
// connected.
func TestOpenWithClient(t *testing.T) {
	t.Parallel()
	app := testmongo.DB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := mongodb.Open(ctx, mongodb.Config{Client: app.Client(), Database: app.Name()})
	require.NoError(t, err)
	assert.Same(t, app.Client(), db.Client())
	checkParts(ctx, t, db)
	n, err := app.Collection(mongostore.EventsCollection).CountDocuments(ctx, bson.D{{Key: "topic", Value: "orders.created"}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the events are in the application's database")
	require.NoError(t, db.Close(ctx))
	require.NoError(t, app.Client().Ping(ctx, nil), "Close leaves the application's client connected")
}

// TestTransactions: an outbox row and a dedupe mark commit with the
// application's write, or not at all. It needs a replica set: on the
// bundled test server, which has no transactions, it skips (as
// mongotxn's TestTransactions does) and the rest of the package runs.
func TestTransactions(t *testing.T) {
	app := testmongo.DB(t)
	testmongo.RequireTransactions(t, app)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := mongodb.Open(ctx, mongodb.Config{Client: app.Client(), Database: app.Name()})
	require.NoError(t, err)
	defer db.Close(ctx)
	orders := db.Database().Collection("orders")
	order := func(id string, fail error) error {
		return db.Txn().InTx(ctx, func(ctx context.Context) error {
			if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
				return err
			}
			if err := db.Outbox().Add(ctx, outbox.Message{Topic: "orders.created", Payload: []byte(`{"id":"` + id + `"}`)}); err != nil {
				return err
			}
			if err := db.Dedupe().MarkDone(ctx, "k-"+id, "w", time.Hour); err != nil {
				return err
			}
			return fail
		})
	}
	require.NoError(t, order("o-1", nil))
	errRefused := errors.New("payment refused")
	require.ErrorIs(t, order("o-2", errRefused), errRefused)
	n, err := orders.CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	stats, err := db.Outbox().Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Pending)
	for key, want := range map[string]bool{"k-o-1": true, "k-o-2": false} {
		seen, err := db.Dedupe().Seen(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, want, seen, key)
	}
}

// TestConfigValidate: every bad setting is named, before any I/O.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  mongodb.Config
		want string
	}{
		{"no URL nor client", mongodb.Config{}, "URL: empty"},
		{"URL and client", mongodb.Config{URL: "mongodb://h", Client: new(mongo.Client)}, "give one"},
		{"store database", mongodb.Config{URL: "mongodb://h", Store: mongostore.Config{Database: "d"}}, "Store.Database"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			require.ErrorIs(t, err, mongodb.ErrInvalid)
			assert.ErrorContains(t, err, tt.want)
			_, err = mongodb.Open(context.Background(), tt.cfg)
			require.ErrorIs(t, err, mongodb.ErrInvalid, "Open validates first")
		})
	}
}

// checkParts publishes through the store, adds an outbox row and claims
// and completes a dedupe key (outside transactions, which the bundled
// test server lacks), and runs a changelog table.
func checkParts(ctx context.Context, t *testing.T, db *mongodb.DB) {
	t.Helper()
	bus, err := event.NewBus(db.Store(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	rec, err := bus.Publish(ctx, "orders.created", []byte(`{"id":"o-1"}`))
	require.NoError(t, err)

	require.NoError(t, db.Outbox().Add(ctx, outbox.Message{Topic: "orders.created", Payload: []byte(`{"id":"o-2"}`)}))
	stats, err := db.Outbox().Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Pending)
	n, err := db.Database().Collection("outbox").CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the outbox is in the store's database")

	key := dedupe.Key("orders.created", "mail", rec.ID)
	state, err := db.Dedupe().Claim(ctx, key, "worker-1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Acquired, state)
	require.NoError(t, db.Dedupe().Complete(ctx, key, "worker-1", time.Hour))
	state, err = db.Dedupe().Claim(ctx, key, "worker-2", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Done, state)

	tbl, err := db.Table(mongotable.Config{Bus: bus, Topic: "accounts", Collection: "accounts"})
	require.NoError(t, err)
	_, err = bus.Publish(ctx, "accounts", []byte(`{"balance":10}`), event.WithKey("alice"))
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tbl.Run(runCtx) }()
	require.Eventually(t, func() bool {
		n, err := db.Database().Collection("accounts").CountDocuments(ctx, bson.D{{Key: "_id", Value: "alice"}})
		return err == nil && n == 1
	}, 20*time.Second, 10*time.Millisecond, "the table is in the database")
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		require.NoError(t, err)
	}
	_, err = db.Table(mongotable.Config{Bus: bus, Topic: "accounts", Collection: "t2", DB: db.Client().Database("elsewhere")})
	require.ErrorIs(t, err, mongodb.ErrInvalid)
}
