package event_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// stallingStore is a memory store whose Read blocks, once stall is set,
// until the test ends or release is closed.
type stallingStore struct {
	*event.MemoryStore
	stall   atomic.Bool
	stalled chan struct{} // closed when a Read blocks
	release chan struct{}
	once    sync.Once
}

func (s *stallingStore) Read(ctx context.Context, topic string, after uint64, limit int) ([]event.Record, error) {
	if s.stall.Load() {
		s.once.Do(func() { close(s.stalled) })
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.MemoryStore.Read(ctx, topic, after, limit)
}

// An expired lease is redelivered while the group's store I/O is stuck:
// expiry waits for no store call.
func TestExpiryDoesNotWaitForStoreCalls(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := &stallingStore{
		MemoryStore: event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}),
		stalled:     make(chan struct{}),
		release:     make(chan struct{}),
	}
	b, err := event.NewBus(st, event.Config{Clock: clk})
	require.NoError(t, err)
	ctx := context.Background()
	defer func() {
		close(st.release)
		assert.NoError(t, b.Close(ctx))
	}()
	var mu sync.Mutex
	var got []event.Delivery
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		got = append(got, *d)
		mu.Unlock()
		return nil
	}, event.FromEarliest(), event.WithManualAck(), event.WithAckTimeout(time.Second),
		event.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	deliveries := func() []event.Delivery {
		mu.Lock()
		defer mu.Unlock()
		return append([]event.Delivery(nil), got...)
	}
	first, err := b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(deliveries()) == 1 }, 5*time.Second, time.Millisecond)

	// The next read blocks: publish so that the group reads.
	st.stall.Store(true)
	_, err = b.Publish(ctx, "t", []byte(`2`))
	require.NoError(t, err)
	<-st.stalled

	clk.Advance(time.Second + time.Millisecond)
	require.Eventually(t, func() bool {
		clk.Advance(time.Millisecond) // through the redelivery backoff
		return len(deliveries()) == 2
	}, 5*time.Second, time.Millisecond, "the expired delivery was not redelivered while a read was blocked")
	d := deliveries()[1]
	assert.Equal(t, first.ID, d.ID)
	assert.Equal(t, 2, d.Attempt)
}
