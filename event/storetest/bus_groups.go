package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testGroupSettingsConflict: a group's settings are stored at its first
// Subscribe; a later subscription, in this Bus or another, asking for
// other values is refused by name with nothing changed, and one asking
// for none (or the same) joins.
func testGroupSettingsConflict(t *testing.T, s event.Store) {
	ctx := context.Background()
	a, b := newBus(t, s), newBus(t, s)
	c := newCollector()
	subscribe(t, a, "t", "g", c.handler, event.WithMaxAttempts(3), event.WithAckTimeout(20*time.Second), event.FromEarliest())
	cfg, err := b.GroupConfig(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, 3, cfg.MaxAttempts)
	assert.Equal(t, 20*time.Second, cfg.AckTimeout)
	assert.Equal(t, event.Earliest(), cfg.Start)
	assert.Equal(t, event.DefaultBackoff, cfg.Backoff, "defaults are stored with the group")
	assert.Equal(t, "t.dlq", cfg.DeadLetterTopic)

	for _, bus := range []*event.Bus{a, b} {
		_, err = bus.Subscribe(ctx, "t", "g", c.handler, event.WithMaxAttempts(5), event.WithDeadLetterTopic("t.other"), event.WithAckTimeout(20*time.Second))
		var ce *event.GroupConfigError
		require.ErrorAs(t, err, &ce)
		assert.ErrorIs(t, err, event.ErrInvalid)
		assert.ErrorIs(t, err, event.ErrGroupConfig)
		assert.Equal(t, []event.Conflict{
			{Field: "maxAttempts", Stored: "3", Asked: "5"},
			{Field: "deadLetterTopic", Stored: "t.dlq", Asked: "t.other"},
		}, ce.Conflicts)
		assert.ErrorContains(t, err, `group "g" on topic "t"`)
	}
	sub := subscribe(t, b, "t", "g", c.handler)
	require.NoError(t, sub.Close())
	sub = subscribe(t, b, "t", "g", c.handler, event.WithMaxAttempts(3), event.WithMaxInFlight(7), event.WithConcurrency(2))
	require.NoError(t, sub.Close())
	cfg2, err := a.GroupConfig(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, cfg, cfg2, "refused subscriptions changed nothing")

	_, err = a.CreateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: 4})
	assert.ErrorIs(t, err, event.ErrGroupConfig, "CreateGroup of an existing group with other settings")
	_, err = a.CreateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: 3})
	assert.NoError(t, err, "the same settings: no error")
	_, err = a.UpdateGroup(ctx, "t", "g", func(c *event.GroupConfig) { c.Start = event.AtSeq(2) })
	assert.ErrorIs(t, err, event.ErrInvalid, "the start position is kept")
	_, err = a.UpdateGroup(ctx, "t", "g", func(c *event.GroupConfig) { c.KeyOrdered = true })
	assert.ErrorIs(t, err, event.ErrGroupActive, "key order does not change under live members")
	_, err = a.UpdateGroup(ctx, "t", "none", func(c *event.GroupConfig) { c.MaxAttempts = 2 })
	assert.ErrorIs(t, err, event.ErrNotFound)
}

// testGroupUpdateReachesOtherBus: UpdateGroup in one Bus reaches a member
// of the group in another Bus (another process) within its lease
// renewals: its next deliveries carry the new MaxAttempts, and a record
// that fails is dead-lettered after the new number of attempts.
func testGroupUpdateReachesOtherBus(t *testing.T, s event.Store) {
	ctx := context.Background()
	admin, member := newBus(t, s), newBus(t, s)
	var mu sync.Mutex
	maxSeen := map[uint64]int{}
	attempts := map[uint64]int{}
	subscribe(t, member, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		maxSeen[d.Seq] = d.MaxAttempts
		attempts[d.Seq] = d.Attempt
		if d.Headers["fail"] != "" {
			return errors.New("fails")
		}
		return nil
	}, event.WithBackoff(time.Millisecond, time.Millisecond), event.WithMaxAttempts(5))
	r, err := admin.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return maxSeen[r.Seq] == 5
	}, wait, tick)

	cfg, err := admin.UpdateGroup(ctx, "t", "g", func(c *event.GroupConfig) { c.MaxAttempts = 2 })
	require.NoError(t, err)
	assert.Equal(t, 2, cfg.MaxAttempts)
	// The member delivers by the new settings after its next renewal:
	// publish probes, one at a time, until a delivery says so.
	var probe uint64
	require.Eventually(t, func() bool {
		mu.Lock()
		m, delivered := maxSeen[probe]
		mu.Unlock()
		if probe != 0 && !delivered {
			return false // wait for the probe
		}
		if m == 2 {
			return true
		}
		r, err := admin.Publish(ctx, "t", []byte(`2`))
		require.NoError(t, err)
		probe = r.Seq
		return false
	}, wait, tick, "the update reached the member in the other Bus")

	failing, err := admin.Publish(ctx, "t", []byte(`3`), event.WithHeaders(map[string]string{"fail": "1"}))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		dead, err := s.Read(ctx, "t.dlq", 0, 10)
		require.NoError(t, err)
		for _, d := range dead {
			if d.Headers[event.HeaderDLQID] == failing.ID {
				return true
			}
		}
		return false
	}, wait, tick, "dead-lettered")
	mu.Lock()
	assert.Equal(t, 2, attempts[failing.Seq], "after the new MaxAttempts")
	mu.Unlock()
}

// testForcedResetMovesMembers: a reset of a group with live members is
// refused unless forced; forced, from a Bus that has no member of the
// group, it moves the member in another Bus: that member gives up its
// delivery in flight (its ack is refused) and delivers again from the new
// cursor, and nothing it held is committed over the reset.
func testForcedResetMovesMembers(t *testing.T, s event.Store) {
	ctx := context.Background()
	admin, member := newBus(t, s), newBus(t, s)
	pubN(t, admin, "t", 10)
	var mu sync.Mutex
	var held *event.Delivery
	got := map[uint64]int{}
	subscribe(t, member, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got[d.Seq]++
		if d.Seq == 10 && held == nil {
			held = d // left in flight
			return nil
		}
		return d.Ack(ctx)
	}, event.FromEarliest(), event.WithManualAck(), event.WithAckTimeout(time.Minute))
	waitCursor(t, member, "t", "g", 9)
	mu.Lock()
	require.NotNil(t, held)
	mu.Unlock()

	_, err := admin.ResetCursor(ctx, "t", "g", event.AtSeq(4), false)
	require.ErrorIs(t, err, event.ErrGroupActive, "live members, not forced")
	res, err := admin.ResetCursor(ctx, "t", "g", event.AtSeq(4), true)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), res.Seq)
	assert.NotEmpty(t, res.Members)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for seq := uint64(4); seq <= 10; seq++ {
			if got[seq] < 2 {
				return false
			}
		}
		return true
	}, wait, tick, "the member delivers again from the new cursor")
	mu.Lock()
	for seq := uint64(1); seq <= 3; seq++ {
		assert.Equal(t, 1, got[seq], "seq %d is before the new cursor", seq)
	}
	old := held
	mu.Unlock()
	assert.Error(t, old.Ack(ctx), "the delivery in flight before the reset is given up")
	waitCursor(t, admin, "t", "g", 10)
}

// expiryObserver records the groups the Bus reports expired.
type expiryObserver struct {
	event.NopObserver
	mu   sync.Mutex
	gone []string
}

func (o *expiryObserver) GroupExpired(topic, group string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gone = append(o.gone, topic+"/"+group)
}

// testGroupExpiry: a group whose settings have an expiration policy is
// deleted once it has had no member and no commit for that long, with
// its cursors, settings and redrive cursors, logged and counted; a group
// without a policy is kept; a group that comes back after expiring starts
// afresh at its start position.
func testGroupExpiry(t *testing.T, s event.Store, o Options) {
	s, clk := clocked(t, s, o)
	if _, ok := s.(event.Lister); !ok {
		t.Skip("store does not implement Lister")
	}
	ctx := context.Background()
	obs := &expiryObserver{}
	b := newBus(t, s, func(c *event.Config) {
		c.Clock, c.ExpirySweep, c.Observer = clk, -1, obs
	})
	ft := fakeTime{t: t, clk: clk}
	pubN(t, b, "t", 3)
	use := func(group string, opts ...event.SubscribeOption) {
		t.Helper()
		c := newCollector()
		sub := subscribe(t, b, "t", group, c.handler, append(opts, event.FromEarliest())...)
		ft.waitCursor(b, "t", group, 3)
		require.NoError(t, sub.Close())
	}
	use("viewer", event.WithExpireAfter(time.Hour))
	use("kept")
	use("later", event.WithExpireAfter(3*time.Hour))
	groups := func() []string {
		t.Helper()
		gis, err := s.(event.Lister).ListGroups(ctx, "t")
		require.NoError(t, err)
		var out []string
		for _, g := range gis {
			out = append(out, g.Group)
		}
		return out
	}
	require.ElementsMatch(t, []string{"viewer", "kept", "later"}, groups())

	clk.Advance(30 * time.Minute)
	gone, err := b.ExpireGroups(ctx)
	require.NoError(t, err)
	assert.Empty(t, gone, "nothing idle for its policy yet")

	clk.Advance(time.Hour)
	gone, err = b.ExpireGroups(ctx)
	require.NoError(t, err)
	require.Len(t, gone, 1)
	assert.Equal(t, "viewer", gone[0].Group)
	assert.ElementsMatch(t, []string{"kept", "later"}, groups())
	_, err = b.GroupConfig(ctx, "t", "viewer")
	assert.ErrorIs(t, err, event.ErrNotFound, "its settings are gone")
	_, err = b.Cursor(ctx, "t", "viewer")
	assert.ErrorIs(t, err, event.ErrNotFound, "and its cursors")
	obs.mu.Lock()
	assert.Equal(t, []string{"t/viewer"}, obs.gone, "counted")
	obs.mu.Unlock()

	// It comes back as a new group, at its start position (latest here).
	c := newCollector()
	sub := subscribe(t, b, "t", "viewer", c.handler, event.WithExpireAfter(time.Hour))
	r, err := b.Publish(ctx, "t", []byte(`"new"`))
	require.NoError(t, err)
	ft.eventually(time.Millisecond, func() bool { return c.distinct() == 1 })
	assert.Equal(t, []uint64{r.Seq}, c.seqList())
	require.NoError(t, sub.Close())

	clk.Advance(3 * time.Hour)
	gone, err = b.ExpireGroups(ctx)
	require.NoError(t, err)
	var names []string
	for _, g := range gone {
		names = append(names, g.Group)
	}
	assert.ElementsMatch(t, []string{"later", "viewer"}, names)
	assert.Equal(t, []string{"kept"}, groups(), "a group without a policy is kept")
}
