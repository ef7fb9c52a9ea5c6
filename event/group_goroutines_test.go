package event_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/stacktest"
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
	dead := oneDeadLetter(t, st, "orders")
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

// deepStore is a memory store whose renewals need a deep stack, as the
// SQLite library's do (it runs on its caller's stack): 64 frames of 1 KB.
type deepStore struct {
	*event.MemoryStore
	renewals atomic.Int64
}

func (d *deepStore) Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) ([]string, []event.LeaseGrant, error) {
	stacktest.Deep(64)
	defer d.renewals.Add(1)
	return d.MemoryStore.Renew(ctx, topic, group, member, ttl, parts)
}

// An idle group does not keep the stack of its store's calls: its
// renewals run on a goroutine that ends with them, so its run loop, which
// lives as long as the group, keeps the few kilobytes of its own frames.
// Before, each idle group over a store whose calls need a deep stack held
// that stack for good, renewed every LeaseTTL/3. Measured as the stacks
// in use after the renewals, with one collection (which halves a parked
// goroutine's stack at most once). Not parallel: it measures the process.
func TestIdleGroupKeepsNoStoreStack(t *testing.T) {
	const groups = 100
	const ttl = 3 * time.Second
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := &deepStore{MemoryStore: event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})}
	b, err := event.NewBus(st, event.Config{Clock: clk, LeaseTTL: ttl})
	require.NoError(t, err)
	ctx := context.Background()
	defer func() { assert.NoError(t, b.Close(ctx)) }()
	for i := range groups {
		_, err := b.Subscribe(ctx, "t", fmt.Sprintf("g%d", i), func(context.Context, *event.Delivery) error { return nil })
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		s := b.Stats()
		if len(s) != groups {
			return false
		}
		for _, g := range s {
			if len(g.Partitions) != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "every group takes its partition")
	for range 5 {
		runtime.GC() // what setting up grew, shrunk
	}
	idle := runtime.NumGoroutine()
	for range 2 {
		r := st.renewals.Load()
		clk.Advance(ttl / 3)
		require.Eventually(t, func() bool { return st.renewals.Load() >= r+groups && runtime.NumGoroutine() <= idle+1 }, // and Eventually's own
			10*time.Second, time.Millisecond, "every group renews, and its renewal's goroutine ends")
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	perGroup := m.StackInuse / groups
	t.Logf("stacks in use: %d KB, %.1f KB per idle group", m.StackInuse>>10, float64(m.StackInuse)/groups/1024)
	// Kept, each would be 64 KB or more (a 128 KB stack halved once).
	assert.Less(t, perGroup, uint64(32<<10), "idle groups keep the stack of their renewals")
}
