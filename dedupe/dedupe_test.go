package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/dedupetest"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/txn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStoreConformance(t *testing.T) {
	dedupetest.Run(t, func(*testing.T) dedupe.Store { return dedupe.NewMemoryStore() }, dedupetest.Options{
		Clocked: func(_ *testing.T, c clock.Clock) dedupe.Store {
			return dedupe.NewMemoryStoreWith(dedupe.MemoryStoreConfig{Clock: c})
		},
	})
}

func TestSubscribeExactlyOnceRefusesShortTTL(t *testing.T) {
	t.Parallel()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(context.Background())
	h := func(context.Context, *event.Delivery) error { return nil }
	_, err = dedupe.SubscribeExactlyOnce(context.Background(), dedupe.Config{
		Bus: bus, Topic: "t", Group: "g", Store: dedupe.NewMemoryStore(), Handler: h, Options: dedupe.Options{
			TTL:       time.Minute,
			Subscribe: []event.SubscribeOption{event.WithAckTimeout(time.Minute), event.WithMaxAttempts(3)},
		},
	})
	assert.ErrorIs(t, err, dedupe.ErrInvalid)
	assert.ErrorContains(t, err, "TTL")
	_, err = dedupe.SubscribeExactlyOnce(context.Background(), dedupe.Config{
		Bus: bus, Topic: "t", Group: "g", Store: dedupe.NewMemoryStore(), Handler: h,
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{event.WithManualAck()}},
	})
	assert.ErrorContains(t, err, "manual ack")
	_, err = dedupe.SubscribeExactlyOnce(context.Background(), dedupe.Config{Bus: bus, Topic: "t", Group: "g", Handler: h})
	assert.ErrorContains(t, err, "Store")
}

// The TTL is checked against the horizon of the group's stored settings
// ([event.GroupConfig]), not against the defaults of the settings a
// subscription does not ask for: a group stored with a long horizon
// refuses a TTL that the defaults would allow, one stored with a short
// horizon takes a TTL that the defaults would refuse. A TTL refused for
// a new group leaves no group behind, and a subscription asking for other
// settings than the stored ones is refused as by Subscribe.
func TestSubscribeExactlyOnceChecksTheGroupsStoredSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	h := func(context.Context, *event.Delivery) error { return nil }
	sub := func(group string, ttl time.Duration, opts ...event.SubscribeOption) (*event.Subscription, error) {
		return dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{
			Bus: bus, Topic: "t", Group: group, Store: dedupe.NewMemoryStore(), Handler: h,
			Options: dedupe.Options{TTL: ttl, Subscribe: opts},
		})
	}

	long := event.GroupConfig{AckTimeout: 10 * time.Minute, MaxAttempts: 10}
	_, err = bus.CreateGroup(ctx, "t", "long", long)
	require.NoError(t, err)
	require.Greater(t, long.Horizon(), 90*time.Minute)
	require.Less(t, event.GroupConfig{}.Horizon(), time.Hour, "the defaults' horizon")
	_, err = sub("long", time.Hour)
	assert.ErrorIs(t, err, dedupe.ErrInvalid)
	assert.ErrorContains(t, err, "TTL", "an hour is shorter than the stored horizon")
	_, err = closeOK(sub("long", 0))
	assert.NoError(t, err, "the default TTL covers the stored horizon")

	_, err = bus.CreateGroup(ctx, "t", "short", event.GroupConfig{AckTimeout: time.Second, MaxAttempts: 2, Backoff: time.Millisecond})
	require.NoError(t, err)
	require.Greater(t, event.GroupConfig{}.Horizon(), time.Minute, "the defaults' horizon")
	_, err = closeOK(sub("short", time.Minute))
	assert.NoError(t, err, "a minute covers the stored horizon")

	_, err = sub("new", time.Minute, event.WithAckTimeout(time.Minute))
	assert.ErrorContains(t, err, "TTL")
	_, err = bus.GroupConfig(ctx, "t", "new")
	assert.ErrorIs(t, err, event.ErrNotFound, "a refused subscription creates no group")

	_, err = sub("short", 0, event.WithMaxAttempts(5))
	var conflict *event.GroupConfigError
	require.ErrorAs(t, err, &conflict)
	require.Len(t, conflict.Conflicts, 1)
	assert.Equal(t, "maxAttempts", conflict.Conflicts[0].Field)
}

// closeOK closes the subscription of a successful subscribe, returning its
// error.
func closeOK(s *event.Subscription, err error) (*event.Subscription, error) {
	if err == nil {
		err = s.Close()
	}
	return s, err
}

// A group whose settings are updated while it is subscribed: the wrapper
// reads them again, so the done marks outlive the new, longer horizon
// rather than the TTL checked against the old one.
func TestSubscribeExactlyOnceFollowsUpdateGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := dedupe.NewMemoryStoreWith(dedupe.MemoryStoreConfig{Clock: clk})
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	sub, err := dedupe.SubscribeExactlyOnce(ctx, dedupe.Config{
		Bus: bus, Topic: "t", Group: "g", Store: store,
		Handler: func(context.Context, *event.Delivery) error { return nil },
		Options: dedupe.Options{TTL: time.Minute, Clock: clk, Subscribe: []event.SubscribeOption{
			event.FromEarliest(), event.WithAckTimeout(time.Second), event.WithMaxAttempts(2), event.WithBackoff(time.Millisecond, time.Millisecond),
		}},
	})
	require.NoError(t, err)
	defer sub.Close()
	cfg, err := bus.UpdateGroup(ctx, "t", "g", func(c *event.GroupConfig) { c.AckTimeout, c.MaxAttempts = time.Hour, 3 })
	require.NoError(t, err)
	clk.Advance(time.Minute) // past the wrapper's next read of the settings
	r, err := bus.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := bus.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == r.Seq
	}, 10*time.Second, 5*time.Millisecond)
	clk.Advance(cfg.Horizon() - time.Second)
	seen, err := store.Seen(ctx, dedupe.Key("t", "g", r.ID))
	require.NoError(t, err)
	assert.True(t, seen, "the id is remembered for the updated horizon, past the TTL of a minute")
	clk.Advance(2 * time.Second)
	seen, err = store.Seen(ctx, dedupe.Key("t", "g", r.ID))
	require.NoError(t, err)
	assert.False(t, seen, "and no longer")
}

// Wrap, given the Bus, checks the TTL against the group's stored
// settings; without it, against those asked for.
func TestWrapChecksTheGroupsStoredSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	_, err = bus.CreateGroup(ctx, "t", "g", event.GroupConfig{AckTimeout: 10 * time.Minute, MaxAttempts: 10})
	require.NoError(t, err)
	cfg := dedupe.Config{
		Topic: "t", Group: "g", Store: dedupe.NewMemoryStore(), Options: dedupe.Options{TTL: time.Hour},
		Handler: func(context.Context, *event.Delivery) error { return nil },
	}
	_, err = dedupe.Wrap(cfg)
	assert.NoError(t, err, "without the Bus, the horizon of the defaults")
	cfg.Bus = bus
	_, err = dedupe.Wrap(cfg)
	assert.ErrorContains(t, err, "TTL", "with it, the stored horizon")
}

func TestSubscribeExactlyOnceTxRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := dedupe.SubscribeExactlyOnceTx(context.Background(), dedupe.TxConfig{})
	assert.ErrorIs(t, err, dedupe.ErrInvalid)
	for _, f := range []string{"Bus", "Store", "Tx", "Handler"} {
		assert.ErrorContains(t, err, f)
	}
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(context.Background())
	_, err = dedupe.SubscribeExactlyOnceTx(context.Background(), dedupe.TxConfig{
		Bus: bus, Topic: "t", Group: "g", Store: txStore{dedupe.NewMemoryStore()},
		Tx:      txn.RunnerFunc(func(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }),
		Handler: func(context.Context, *event.Delivery) error { return nil },
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{event.WithManualAck()}},
	})
	assert.ErrorContains(t, err, "manual ack")
}

// txStore gives the memory store a MarkDone for the config checks; it is
// never called.
type txStore struct{ *dedupe.MemoryStore }

func (txStore) MarkDone(context.Context, string, string, time.Duration) error {
	return errors.New("not called")
}

// The memory store and the reaper read the time from their clocks.
func TestMemoryStoreAndReaperFollowTheirClock(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	s := dedupe.NewMemoryStoreWith(dedupe.MemoryStoreConfig{Clock: fake})
	ctx := context.Background()
	st, err := s.Claim(ctx, "k", "a", time.Minute)
	require.NoError(t, err)
	require.Equal(t, dedupe.Acquired, st)
	require.NoError(t, s.Complete(ctx, "k", "a", time.Hour))
	fake.Advance(59 * time.Minute)
	seen, err := s.Seen(ctx, "k")
	require.NoError(t, err)
	assert.True(t, seen, "done until the fake clock passes the TTL")
	fake.Advance(time.Minute)
	seen, err = s.Seen(ctx, "k")
	require.NoError(t, err)
	assert.False(t, seen, "expired on the fake clock")

	reaps := &countingReaper{Store: s, reaped: make(chan int, 1)}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- dedupe.RunReaper(rctx, reaps, dedupe.ReaperConfig{Interval: time.Hour, Clock: fake}) }()
	require.NoError(t, fake.WaitTimers(ctx, 1))
	fake.Advance(time.Hour)
	assert.Equal(t, 1, <-reaps.reaped, "the reaper ran on the fake clock's hour and deleted the expired key")
	cancel()
	require.NoError(t, <-done)
	assert.ErrorIs(t, dedupe.RunReaper(ctx, s, dedupe.ReaperConfig{}), dedupe.ErrInvalid)
}

// countingReaper reports what each Reap deleted.
type countingReaper struct {
	dedupe.Store
	reaped chan int
}

func (s *countingReaper) Reap(ctx context.Context) (int, error) {
	n, err := s.Store.Reap(ctx)
	s.reaped <- n
	return n, err
}

// The memory store deletes expired keys by itself: past their TTL and
// the sweep interval, the next write finds them gone, without RunReaper,
// so the store holds no more than the keys of one TTL and one sweep.
func TestMemoryStoreExpiresKeysByItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := dedupe.NewMemoryStoreWith(dedupe.MemoryStoreConfig{Clock: fk, SweepInterval: time.Minute})
	const ttl = 10 * time.Minute
	mark := func(key string) {
		t.Helper()
		st, err := s.Claim(ctx, key, "o", time.Minute)
		require.NoError(t, err)
		require.Equal(t, dedupe.Acquired, st)
		require.NoError(t, s.Complete(ctx, key, "o", ttl))
	}
	most := 0
	// An hour of traffic, 10 keys a minute, each remembered for ttl.
	for minute := range 60 {
		for i := range 10 {
			mark(fmt.Sprintf("k-%d-%d", minute, i))
		}
		most = max(most, s.Len())
		fk.Advance(time.Minute)
	}
	// ttl's keys, plus those that expired since the last sweep.
	assert.LessOrEqual(t, most, 10*(10+2), "the store is bounded by the keys of one TTL")
	seen, err := s.Seen(ctx, "k-0-0")
	require.NoError(t, err)
	assert.False(t, seen)
	seen, err = s.Seen(ctx, "k-59-9")
	require.NoError(t, err)
	assert.True(t, seen, "a live key stays")

	fk.Advance(ttl + time.Minute)
	mark("late")
	assert.Equal(t, 1, s.Len(), "every expired key is gone, without RunReaper")
}
