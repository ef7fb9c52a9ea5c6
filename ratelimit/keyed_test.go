package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
)

func TestKeyedSharesBucketPerKey(t *testing.T) {
	t.Parallel()
	k, err := NewKeyed(KeyedConfig{Limit: Limit{Rate: 1, Burst: 2}})
	require.NoError(t, err)
	now := time.Unix(1_000_000, 0)
	assert.True(t, k.AllowAt(now, "a"))
	assert.True(t, k.AllowAt(now, "a"))
	assert.False(t, k.AllowAt(now, "a"))
	assert.True(t, k.AllowAt(now, "b"), "keys have their own buckets")
	assert.True(t, k.AllowAt(now.Add(time.Second), "a"), "a token per second")
}

func TestKeyedUnlimitedKeepsNothing(t *testing.T) {
	t.Parallel()
	k, err := NewKeyed(KeyedConfig{})
	require.NoError(t, err)
	for i := 0; i < 1000; i++ {
		assert.True(t, k.Allow(strconv.Itoa(i)))
	}
	assert.Equal(t, 0, k.Len())
	assert.NoError(t, k.Wait(context.Background(), "x"))
}

// TestKeyedForgetsIdleKeys: many topics used once do not stay in memory.
func TestKeyedForgetsIdleKeys(t *testing.T) {
	t.Parallel()
	k, err := NewKeyed(KeyedConfig{Limit: Limit{Rate: 100, Burst: 10}, SweepInterval: time.Second})
	require.NoError(t, err)
	now := time.Unix(1_000_000, 0)
	for i := 0; i < 10_000; i++ {
		require.True(t, k.AllowAt(now, "topic."+strconv.Itoa(i)))
	}
	assert.Equal(t, 10_000, k.Len())
	// One second later every bucket has refilled; the next call sweeps.
	require.True(t, k.AllowAt(now.Add(time.Second), "fresh"))
	assert.Equal(t, 1, k.Len())
}

// TestKeyedKeepsBusyKeys: a bucket that is not full is never forgotten by
// the idle sweep, so forgetting never hands out a fresh burst.
func TestKeyedKeepsBusyKeys(t *testing.T) {
	t.Parallel()
	k, err := NewKeyed(KeyedConfig{Limit: Limit{Rate: 1, Burst: 3}, SweepInterval: time.Second})
	require.NoError(t, err)
	now := time.Unix(1_000_000, 0)
	for i := 0; i < 3; i++ {
		require.True(t, k.AllowAt(now, "hot"))
	}
	later := now.Add(1500 * time.Millisecond) // 1.5 tokens back, not full
	require.True(t, k.AllowAt(later, "other"))
	assert.Equal(t, 2, k.Len())
	assert.True(t, k.AllowAt(later, "hot"))
	assert.False(t, k.AllowAt(later, "hot"), "the hot key kept its state through the sweep")
}

// TestKeyedMaxKeys: with every bucket busy, the set still stays at its bound.
func TestKeyedMaxKeys(t *testing.T) {
	t.Parallel()
	k, err := NewKeyed(KeyedConfig{Limit: Limit{Rate: 0.001, Burst: 1}, MaxKeys: 100})
	require.NoError(t, err)
	now := time.Unix(1_000_000, 0)
	for i := 0; i < 1_000; i++ {
		k.AllowAt(now.Add(time.Duration(i)*time.Millisecond), strconv.Itoa(i))
		require.LessOrEqual(t, k.Len(), 100)
	}
	// The most recent keys are the ones kept.
	assert.False(t, k.AllowAt(now.Add(time.Second), "999"))
}

func TestKeyedWait(t *testing.T) {
	t.Parallel()
	k, err := NewKeyed(KeyedConfig{Limit: Limit{Rate: 1000, Burst: 1}})
	require.NoError(t, err)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		require.NoError(t, k.Wait(ctx, "k"))
	}
	slow, err := NewKeyed(KeyedConfig{Limit: Limit{Rate: 0.001, Burst: 1}})
	require.NoError(t, err)
	require.NoError(t, slow.Wait(ctx, "k"))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, slow.Wait(cctx, "k"), context.Canceled)
}

// TestKeyedOnClock: Allow and Wait tell the time by the configured clock.
func TestKeyedOnClock(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	k, err := NewKeyed(KeyedConfig{Limit: Limit{Rate: 1, Burst: 1}, Clock: clk})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.True(t, k.Allow("a"))
	assert.False(t, k.Allow("a"))
	clk.Advance(time.Second)
	assert.True(t, k.Allow("a"), "a token per second of the clock")

	require.NoError(t, k.Wait(ctx, "b"))
	done := make(chan error, 1)
	go func() { done <- k.Wait(ctx, "b") }()
	require.NoError(t, clk.WaitTimers(ctx, 1))
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before the bucket refilled", err)
	default:
	}
	clk.Advance(time.Second)
	assert.NoError(t, <-done)
}

// TestKeyedHasTokenAndCharge: a peek takes nothing and keeps nothing;
// charges beyond the bucket are owed, so it stays empty until repaid, and
// an idle bucket is forgotten like any other.
func TestKeyedHasTokenAndCharge(t *testing.T) {
	t.Parallel()
	k, err := NewKeyed(KeyedConfig{Limit: Limit{Rate: 1, Burst: 2}, SweepInterval: time.Second})
	require.NoError(t, err)
	now := time.Unix(1_000_000, 0)
	for range 5 {
		assert.True(t, k.HasTokenAt(now, "a"))
	}
	assert.Equal(t, 0, k.Len(), "a peek keeps no bucket")
	for range 4 { // two more than the burst
		k.ChargeAt(now, "a")
	}
	assert.False(t, k.HasTokenAt(now, "a"))
	assert.True(t, k.HasTokenAt(now, "b"), "keys have their own buckets")
	assert.False(t, k.HasTokenAt(now.Add(2*time.Second), "a"), "the debt is repaid first")
	assert.True(t, k.HasTokenAt(now.Add(3*time.Second), "a"))
	k.ChargeAt(now.Add(time.Second), "b") // sweeps
	assert.Equal(t, 2, k.Len(), "a is not full yet")
	k.ChargeAt(now.Add(5*time.Second), "c")
	assert.Equal(t, 1, k.Len(), "a and b refilled and were forgotten")

	off, err := NewKeyed(KeyedConfig{})
	require.NoError(t, err)
	off.ChargeAt(now, "a")
	assert.True(t, off.HasTokenAt(now, "a"))
	assert.Equal(t, 0, off.Len())
}
