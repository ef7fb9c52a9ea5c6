package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testGroupConfig checks GroupStore: settings created once (of concurrent
// creations exactly one wins), read back field by field, replaced by an
// update, listed with the group and deleted with it.
func testGroupConfig(t *testing.T, s event.Store) {
	gs, ok := s.(event.GroupStore)
	if !ok {
		t.Skip("store does not implement GroupStore")
	}
	ctx := context.Background()
	_, err := gs.GroupConfig(ctx, "t", "g")
	assert.ErrorIs(t, err, event.ErrNotFound, "a group without settings")
	assert.ErrorIs(t, gs.UpdateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: 2}), event.ErrNotFound)

	full := event.GroupConfig{
		Start:      event.AfterRecord("id-1"),
		AckTimeout: 1500 * time.Millisecond, MaxAttempts: 7,
		Backoff: 20 * time.Millisecond, MaxBackoff: 3 * time.Second,
		DeadLetterTopic: "t.dead", KeyOrdered: true, MaxPerKey: 9,
		ExpireAfter: 36 * time.Hour,
	}
	got, created, err := gs.CreateGroup(ctx, "t", "g", full)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, full, got)
	got, created, err = gs.CreateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: 2})
	require.NoError(t, err)
	assert.False(t, created, "the first settings win")
	assert.Equal(t, full, got, "the stored settings, not the asked ones")
	got, err = gs.GroupConfig(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, full, got)
	_, err = gs.GroupConfig(ctx, "t", "other")
	assert.ErrorIs(t, err, event.ErrNotFound, "settings are per group")
	_, err = gs.GroupConfig(ctx, "u", "g")
	assert.ErrorIs(t, err, event.ErrNotFound, "and per topic")

	upd := full
	upd.MaxAttempts, upd.AckTimeout, upd.ExpireAfter = 3, time.Minute, 0
	require.NoError(t, gs.UpdateGroup(ctx, "t", "g", upd))
	got, err = gs.GroupConfig(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, upd, got)
	assert.ErrorIs(t, gs.UpdateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: -1}), event.ErrInvalid)
	got, err = gs.GroupConfig(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, upd, got, "a refused update changes nothing")

	// Concurrent creations: one creates, all see its settings.
	var wg sync.WaitGroup
	res := make([]event.GroupConfig, 8)
	made := make([]bool, 8)
	errs := make([]error, 8)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], made[i], errs[i] = gs.CreateGroup(ctx, "t", "race", event.GroupConfig{MaxAttempts: i + 1})
		}()
	}
	wg.Wait()
	n := 0
	for i := range res {
		require.NoError(t, errs[i])
		assert.Equal(t, res[0], res[i])
		if made[i] {
			n++
			assert.Equal(t, i+1, res[i].MaxAttempts, "the creator's settings")
		}
	}
	assert.Equal(t, 1, n, "exactly one call creates the settings")

	l, ok := s.(event.Lister)
	if !ok {
		return
	}
	cs := s.(event.CursorStore)
	require.NoError(t, cs.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "g"}, 0, event.Fence{}))
	infos, err := l.ListGroups(ctx, "t")
	require.NoError(t, err)
	var found bool
	for _, gi := range infos {
		if gi.Group == "g" {
			found = true
			require.NotNil(t, gi.Config, "the group is listed with its settings")
			assert.Equal(t, upd, *gi.Config)
		}
	}
	assert.True(t, found)
	require.NoError(t, l.DeleteGroup(ctx, "t", "g"))
	_, err = gs.GroupConfig(ctx, "t", "g")
	assert.ErrorIs(t, err, event.ErrNotFound, "deleting a group deletes its settings")
	got, created, err = gs.CreateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: 4})
	require.NoError(t, err)
	assert.True(t, created, "a deleted group is created afresh")
	assert.Equal(t, 4, got.MaxAttempts)
}

// testTakeLease checks LeaseStore.TakeLease: it takes a partition from its
// holder, with a greater token, so that the holder's fenced writes are
// refused and its renewals fail until the taker releases it.
func testTakeLease(t *testing.T, s event.Store, o Options) {
	s, clk := clocked(t, s, o)
	ctx := context.Background()
	ls := s.(event.LeaseStore)
	cs := s.(event.CursorStore)
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 2}
	const ttl = 10 * time.Second

	ta, ok, err := ls.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, cs.CommitCursor(ctx, p, 5, event.Fence{Member: "a", Token: ta}))

	top, err := ls.TakeLease(ctx, p, "operator", ttl)
	require.NoError(t, err)
	assert.Greater(t, top, ta, "a taken lease has a greater token")
	err = cs.CommitCursor(ctx, p, 9, event.Fence{Member: "a", Token: ta})
	assert.ErrorIs(t, err, event.ErrLeaseLost, "the previous holder's writes are refused")
	_, ok, err = ls.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	assert.False(t, ok, "the previous holder cannot renew while the taker holds it")
	require.NoError(t, cs.SetCursor(ctx, p, 2))

	require.NoError(t, ls.ReleaseLease(ctx, p, "operator"))
	tb, ok, err := ls.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, tb, top, "the next holder gets a new token: it must read the moved cursor")
	c, err := cs.Cursors(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), c[2])

	// A taker that never releases holds the partition for ttl only.
	_, err = ls.TakeLease(ctx, p, "operator", ttl)
	require.NoError(t, err)
	clk.Advance(ttl + time.Second)
	_, ok, err = ls.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	assert.True(t, ok, "the taken lease runs out")

	// Taking a partition nobody held works too.
	q := event.PartitionRef{Topic: "t", Group: "g", Partition: 3}
	tq, err := ls.TakeLease(ctx, q, "operator", ttl)
	require.NoError(t, err)
	assert.NotZero(t, tq)
}

// testExpireGroup checks Lister.ExpireGroup and GroupInfo.LastActive: a
// group is expired only with no live member and no activity since the
// cut-off, and then nothing of it is left.
func testExpireGroup(t *testing.T, s event.Store, o Options) {
	s, clk := clocked(t, s, o)
	l, ok := s.(event.Lister)
	if !ok {
		t.Skip("store does not implement Lister")
	}
	ctx := context.Background()
	ls := s.(event.LeaseStore)
	cs := s.(event.CursorStore)
	const ttl = 10 * time.Second
	p := event.PartitionRef{Topic: "t", Group: "g"}
	info := func() (event.GroupInfo, bool) {
		t.Helper()
		gis, err := l.ListGroups(ctx, "t")
		require.NoError(t, err)
		for _, gi := range gis {
			if gi.Group == "g" {
				return gi, true
			}
		}
		return event.GroupInfo{}, false
	}

	require.NoError(t, cs.CommitCursor(ctx, p, 0, event.Fence{}))
	committed := clk.Now().UnixMilli()
	gi, ok := info()
	require.True(t, ok)
	assert.GreaterOrEqual(t, gi.LastActive, committed, "a cursor commit is activity")

	_, err := ls.Heartbeat(ctx, "t", "g", "m1", ttl)
	require.NoError(t, err)
	gi, _ = info()
	assert.GreaterOrEqual(t, gi.LastActive, clk.Now().Add(ttl).UnixMilli(), "a member is active until its heartbeat runs out")

	clk.Advance(time.Hour)
	far := clk.Now().Add(time.Hour).UnixMilli()
	_, err = ls.Heartbeat(ctx, "t", "g", "m1", ttl)
	require.NoError(t, err)
	done, err := l.ExpireGroup(ctx, "t", "g", far)
	require.NoError(t, err)
	assert.False(t, done, "a group with a live member is kept, whatever the cut-off")

	clk.Advance(ttl + time.Second)
	gi, _ = info()
	cut := gi.LastActive
	done, err = l.ExpireGroup(ctx, "t", "g", cut)
	require.NoError(t, err)
	assert.False(t, done, "a group active at the cut-off is kept")
	_, ok = info()
	assert.True(t, ok)

	ok2, err := l.ExpireGroup(ctx, "t", "none", far)
	require.NoError(t, err)
	assert.False(t, ok2, "an unknown group is no error")

	done, err = l.ExpireGroup(ctx, "t", "g", cut+1)
	require.NoError(t, err)
	assert.True(t, done)
	_, ok = info()
	assert.False(t, ok, "an expired group is no longer listed")
	c, err := cs.Cursors(ctx, "t", "g")
	require.NoError(t, err)
	assert.Empty(t, c, "nor has it cursors")
	if gs, ok := s.(event.GroupStore); ok {
		_, err = gs.GroupConfig(ctx, "t", "g")
		assert.ErrorIs(t, err, event.ErrNotFound, "nor settings")
	}
}
