package event_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// bareStore is a memory store seen only as an [event.Store]: no
// [event.Notifier], no [event.InProcessStore], as a store of another
// process is. Its cursors and leases are given to the Bus by hand.
type bareStore struct{ event.Store }

func bareBus(t *testing.T, st *event.MemoryStore, cfg event.Config) *event.Bus {
	t.Helper()
	cfg.Cursors, cfg.Leases = st, st
	b, err := event.NewBus(bareStore{st}, cfg)
	require.NoError(t, err)
	return b
}

// An idle consumer group with a subscription holds one goroutine in its
// Bus, its run loop: its leases and backoffs end in a timer's call and its
// run loop watches its redrive topic (before, each took a goroutine of its
// own, three per group), and an idle subscription holds no handler
// goroutine. Counted over many groups, with the watch of the redrive
// topic on (the Bus's stores: a Notifier, which wakes the run loop, and a
// plain store, whose head the run loop reads). Not parallel: it counts the
// process's goroutines.
func TestIdleGroupHoldsOneGoroutine(t *testing.T) {
	for _, c := range []struct {
		name string
		bus  func(t *testing.T) *event.Bus
	}{
		{"notifier", func(t *testing.T) *event.Bus {
			b, err := event.NewBus(event.NewMemoryStore(), event.Config{})
			require.NoError(t, err)
			return b
		}},
		{"bare", func(t *testing.T) *event.Bus { return bareBus(t, event.NewMemoryStore(), event.Config{}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			const groups = 100
			start := runtime.NumGoroutine()
			b := c.bus(t)
			t.Cleanup(func() { assert.NoError(t, b.Close(ctx)) })
			before := runtime.NumGoroutine() // the Bus's own: none per group
			for i := range groups {
				s, err := b.Subscribe(ctx, "t", fmt.Sprintf("g%d", i), func(context.Context, *event.Delivery) error { return nil })
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("g%d", i), s.Group())
			}
			require.Len(t, b.Stats(), groups)
			var held int
			require.Eventually(t, func() bool {
				held = runtime.NumGoroutine() - before
				return held <= groups+2 // and Eventually's own
			}, 10*time.Second, time.Millisecond, "goroutines held by %d idle groups", groups)
			t.Logf("%d idle groups hold %d goroutines: %.2f per group", groups, held, float64(held)/groups)

			require.NoError(t, b.Close(ctx))
			require.Eventually(t, func() bool { return runtime.NumGoroutine() <= start+2 }, 10*time.Second, time.Millisecond,
				"goroutines left after Close")
		})
	}
}

// Over a store that is no Notifier, a record redriven by another Bus
// sharing the store reaches the group's subscription in this one: its run
// loop reads the head of the group's redrive topic every LeaseTTL until
// the topic holds a record, then the subscription consumes the topic.
func TestRedriveByAnotherBusReachesABareStoresGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := event.NewMemoryStore()
	cfg := event.Config{LeaseTTL: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond, CommitInterval: time.Millisecond}
	a := bareBus(t, st, cfg)
	t.Cleanup(func() { assert.NoError(t, a.Close(ctx)) })
	var got seen
	failing := make(chan struct{})
	_, err := a.Subscribe(ctx, "orders", "billing", func(_ context.Context, d *event.Delivery) error {
		got.add(d.Record)
		select {
		case <-failing:
			return nil
		default:
			return errors.New("no price")
		}
	}, event.FromEarliest(), event.WithMaxAttempts(1))
	require.NoError(t, err)
	orig, err := a.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)
	var dead []event.Record
	require.Eventually(t, func() bool {
		dead, err = st.Read(ctx, event.DeadLetterTopic("orders"), 0, 10)
		return err == nil && len(dead) == 1
	}, 10*time.Second, time.Millisecond)
	close(failing)

	other := bareBus(t, st, cfg) // has no subscription of the group
	t.Cleanup(func() { assert.NoError(t, other.Close(ctx)) })
	out, err := other.Redrive(ctx, dead)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Eventually(t, func() bool { return len(got.get()) == 2 }, 10*time.Second, time.Millisecond,
		"the redrive was not taken up by the group's subscription in the other Bus")
	again := got.get()[1]
	assert.Equal(t, "orders", again.Topic)
	assert.Equal(t, orig.ID, again.ID)
	assert.Equal(t, dead[0].ID, again.Headers[event.HeaderRedriveFrom])
}
