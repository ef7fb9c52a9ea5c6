package sqlitededupe_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/dedupetest"
	"github.com/promethean/promlib/dedupe/sqlitededupe"
	"github.com/promethean/promlib/event/sqlitestore"
)

// openDB opens a new SQLite file of the test as sqlitestore does (WAL,
// one writing connection), closed when the test ends.
func openDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sqlitestore.OpenDB(filepath.Join(t.TempDir(), "app.db"), sqlitestore.Config{Synchronous: "NORMAL"})
	require.NoError(t, err)
	w, r := db.Write, db.Read
	require.NoError(t, r.Close())
	t.Cleanup(func() { require.NoError(t, w.Close()) })
	return w
}

func newStore(t testing.TB, db *sql.DB, c clock.Clock) *sqlitededupe.Store {
	t.Helper()
	s, err := sqlitededupe.New(db, sqlitededupe.Config{Clock: c})
	require.NoError(t, err)
	require.NoError(t, s.CreateTables(context.Background()))
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	dedupetest.Run(t, func(t *testing.T) dedupe.Store { return newStore(t, openDB(t), nil) }, dedupetest.Options{
		Fewer:   raceEnabled,
		Clocked: func(t *testing.T, c clock.Clock) dedupe.Store { return newStore(t, openDB(t), c) },
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := sqlitededupe.New(nil, sqlitededupe.Config{})
	assert.ErrorIs(t, err, dedupe.ErrInvalid)
	assert.ErrorContains(t, err, "db")
	_, err = sqlitededupe.New(openDB(t), sqlitededupe.Config{Table: "1x"})
	assert.ErrorIs(t, err, dedupe.ErrInvalid)
	assert.ErrorContains(t, err, "Table")
}

// RunReaper deletes expired marks and claims, and only those.
func TestReaperDeletesExpiredKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db := openDB(t)
	s := newStore(t, db, fk)
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
		require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM promlib_dedupe`).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return count() == 1 }, 10*time.Second, 5*time.Millisecond, "the reaper deletes the two expired keys")
	cancel()
	require.NoError(t, <-done)
	seen, err := s.Seen(ctx, "done-long")
	require.NoError(t, err)
	assert.True(t, seen)
}
