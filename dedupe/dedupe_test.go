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
