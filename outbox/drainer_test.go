package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/outboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStoreConformance(t *testing.T) {
	outboxtest.Run(t, func(_ *testing.T, c clock.Clock) outboxtest.Store {
		return outbox.NewMemoryStoreWith(outbox.MemoryStoreConfig{Clock: c})
	}, outboxtest.Options{})
}

func TestNewDrainerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := outbox.NewDrainer(outbox.Config{BatchSize: -1})
	assert.ErrorIs(t, err, outbox.ErrInvalid)
	for _, f := range []string{"Store", "Bus", "BatchSize"} {
		assert.ErrorContains(t, err, f)
	}
}

// The drainer and the memory store read the time from their clocks: a
// failed row's retry is due one backoff after the fake clock's now, and
// the drainer polls on the fake clock's timers.
func TestDrainerFollowsItsClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	fake := clock.NewFake(start)
	ob := outbox.NewMemoryStoreWith(outbox.MemoryStoreConfig{Clock: fake})
	ctx := context.Background()
	require.NoError(t, ob.Add(ctx, outbox.Message{ID: "r", Topic: "t", Payload: []byte(`1`)}))
	r, err := ob.Row(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, start.UnixMilli(), r.TS, "the row is stamped with the fake time")

	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	fails := &failingStore{MemoryStore: ob}
	d, err := outbox.NewDrainer(outbox.Config{
		Store: fails, Bus: bus, Clock: fake, PollInterval: time.Second,
		Backoff: 3 * time.Second, MaxBackoff: time.Minute,
	})
	require.NoError(t, err)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	require.Eventually(t, func() bool {
		r, err := ob.Row(ctx, "r")
		return err == nil && r.Attempts == 1
	}, 10*time.Second, time.Millisecond)
	r, err = ob.Row(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, start.Add(3*time.Second), r.NextAt, "the retry is due one backoff after the fake now")
}

// failingStore hands the drainer rows it cannot publish (a bad topic), so
// each attempt is recorded as a retry.
type failingStore struct{ *outbox.MemoryStore }

func (s *failingStore) Claim(ctx context.Context, token int64, n int) ([]outbox.Row, error) {
	rows, err := s.MemoryStore.Claim(ctx, token, n)
	for i := range rows {
		rows[i].Topic = "not a topic" // the drainer cannot make a record of it
	}
	return rows, err
}

// BenchmarkDrainer measures how many rows a drainer publishes per second
// from the memory store; mongooutbox has the same benchmark on MongoDB.
func BenchmarkDrainer(b *testing.B) {
	outboxtest.Bench(b, func(*testing.B) outbox.Store { return outbox.NewMemoryStore() })
}
