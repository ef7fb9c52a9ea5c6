package mongostore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// lateLeases holds back the first heartbeat until release. Cancelled
// meanwhile, it returns at once and is applied when released anyway, as a
// server applies a write whose caller gave up on it.
type lateLeases struct {
	event.LeaseStore
	once     sync.Once
	inFlight chan struct{}
	release  chan struct{}
	applied  chan error
}

func (l *lateLeases) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	first := false
	l.once.Do(func() { first = true })
	if !first {
		return l.LeaseStore.Heartbeat(ctx, topic, group, member, ttl)
	}
	close(l.inFlight)
	select {
	case <-l.release:
		return l.LeaseStore.Heartbeat(ctx, topic, group, member, ttl)
	case <-ctx.Done():
		go func() {
			<-l.release
			_, err := l.LeaseStore.Heartbeat(context.Background(), topic, group, member, ttl)
			l.applied <- err
		}()
		return nil, ctx.Err()
	}
}

// A member whose first heartbeat is applied after it left stays gone: no
// member document is left, and the next subscriber owns every partition at
// once instead of waiting a lease TTL for the ghost to expire.
func TestLateHeartbeatDoesNotResurrectAMember(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	db := testDB(t)
	s := newStoreIn(t, db, func(c *mongostore.Config) { c.Clock = clk })
	ll := &lateLeases{LeaseStore: s, inFlight: make(chan struct{}), release: make(chan struct{}), applied: make(chan error, 1)}
	ctx := context.Background()
	cfg := event.Config{Clock: clk, Partitions: 4, MemberID: "a", Leases: ll}
	a, err := event.NewBus(s, cfg)
	require.NoError(t, err)
	sub, err := a.Subscribe(ctx, "t", "g", func(context.Context, *event.Delivery) error { return nil })
	require.NoError(t, err)
	<-ll.inFlight
	require.NoError(t, sub.Close())
	require.NoError(t, a.Close(ctx))
	close(ll.release)
	err = <-ll.applied
	assert.Error(t, err, "a heartbeat after Leave is refused")

	n, err := client(t).Database(db).Collection(mongostore.MembersCollection).CountDocuments(ctx,
		bson.D{{Key: "topic", Value: "t"}, {Key: "group", Value: "g"}, {Key: "member", Value: bson.D{{Key: "$regex", Value: "^a/"}}}, {Key: "left", Value: bson.D{{Key: "$ne", Value: true}}}})
	require.NoError(t, err)
	assert.Zero(t, n, "no member document of the closed group")

	cfg.MemberID, cfg.Leases = "b", nil
	b, err := event.NewBus(s, cfg)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.Close(ctx)) }()
	_, err = b.Subscribe(ctx, "t", "g", func(context.Context, *event.Delivery) error { return nil })
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st := b.Stats()
		return len(st) == 1 && len(st[0].Partitions) == 4
	}, 10*time.Second, 5*time.Millisecond, "the new subscriber owns every partition without a TTL wait")
}
