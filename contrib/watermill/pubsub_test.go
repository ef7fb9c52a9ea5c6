package watermill_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"

	wm "github.com/promethean/promlib/contrib/watermill"
)

// features are the universal suite's features, the same over every
// store; the package doc says why the others are false and what
// ForceShort scales.
var features = tests.Features{
	ConsumerGroups:                      true,
	ExactlyOnceDelivery:                 false,
	GuaranteedOrder:                     true,
	GuaranteedOrderWithSingleSubscriber: true,
	Persistent:                          true,
	RequireSingleInstance:               false,
	NewSubscriberReceivesOldMessages:    false,
	ForceShort:                          true,
}

// constructors returns the suite's constructors over store: each call
// makes a new Bus (an instance of the Pub/Sub) sharing store, closed when
// the suite's test ends.
func constructors(store event.Store) (tests.PubSubConstructor, tests.ConsumerGroupPubSubConstructor) {
	cg := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		bus, err := event.NewBus(store, event.Config{PollInterval: 10 * time.Millisecond, CommitInterval: 10 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, bus.Close(ctx))
		})
		pub, err := wm.NewPublisher(bus, wm.Config{})
		require.NoError(t, err)
		sub, err := wm.NewSubscriber(bus, wm.SubscriberConfig{ConsumerGroup: group})
		require.NoError(t, err)
		return pub, sub
	}
	return func(t *testing.T) (message.Publisher, message.Subscriber) { return cg(t, "") }, cg
}

func TestUniversalMemory(t *testing.T) {
	t.Parallel()
	pubsub, cg := constructors(event.NewMemoryStore())
	tests.TestPubSub(t, features, pubsub, cg)
}

func TestUniversalSQLite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "events.db"), sqlitestore.Config{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, store.Close(ctx))
	})
	pubsub, cg := constructors(store)
	tests.TestPubSub(t, features, pubsub, cg)
}
