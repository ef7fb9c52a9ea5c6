package pgdedupe_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/dedupetest"
	"github.com/promethean/promlib/dedupe/pgdedupe"
	"github.com/promethean/promlib/internal/testpg"
)

func newStore(t testing.TB, pool *pgxpool.Pool, c clock.Clock) *pgdedupe.Store {
	t.Helper()
	s, err := pgdedupe.New(pool, pgdedupe.Config{Clock: c})
	require.NoError(t, err)
	require.NoError(t, s.CreateTables(context.Background()))
	return s
}

// TestConformance runs the suite with 500 events: every claim is two
// round trips to the server, and 10,000 events (the full count) took 12s
// here.
func TestConformance(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	dedupetest.Run(t, func(t *testing.T) dedupe.Store {
		pool, _ := testpg.Pool(t)
		return newStore(t, pool, nil)
	}, dedupetest.Options{Fewer: true, Clocked: func(t *testing.T, c clock.Clock) dedupe.Store {
		pool, _ := testpg.Pool(t)
		return newStore(t, pool, c)
	}})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := pgdedupe.New(nil, pgdedupe.Config{})
	assert.ErrorIs(t, err, dedupe.ErrInvalid)
	assert.ErrorContains(t, err, "pool")
}

// RunReaper deletes expired marks and claims, and only those.
func TestReaperDeletesExpiredKeys(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	ctx := context.Background()
	fk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pool, _ := testpg.Pool(t)
	s := newStore(t, pool, fk)
	for _, k := range []string{"done-short", "done-long"} {
		st, err := s.Claim(ctx, k, "o", time.Minute)
		require.NoError(t, err)
		require.Equal(t, dedupe.Acquired, st)
	}
	require.NoError(t, s.Complete(ctx, "done-short", "o", time.Minute))
	require.NoError(t, s.Complete(ctx, "done-long", "o", time.Hour))
	_, err := s.Claim(ctx, "claimed", "o", time.Minute)
	require.NoError(t, err)
	fk.Advance(2 * time.Minute)

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- dedupe.RunReaper(rctx, s, dedupe.ReaperConfig{Interval: 30 * time.Second, Clock: fk}) }()
	require.NoError(t, fk.WaitTimers(ctx, 1))
	fk.Advance(30 * time.Second)
	count := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT COUNT(*) FROM promlib_dedupe`).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return count() == 1 }, 10*time.Second, 5*time.Millisecond, "the reaper deletes the two expired keys")
	cancel()
	require.NoError(t, <-done)
	seen, err := s.Seen(ctx, "done-long")
	require.NoError(t, err)
	assert.True(t, seen)
}
