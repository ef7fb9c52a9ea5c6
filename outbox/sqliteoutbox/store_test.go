package sqliteoutbox_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/outboxtest"
	"github.com/promethean/promlib/outbox/sqliteoutbox"
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

func newStore(t testing.TB, db *sql.DB, c clock.Clock) *sqliteoutbox.Store {
	t.Helper()
	s, err := sqliteoutbox.New(db, sqliteoutbox.Config{Clock: c})
	require.NoError(t, err)
	require.NoError(t, s.CreateTables(context.Background()))
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	outboxtest.Run(t, func(t *testing.T, c clock.Clock) outboxtest.Store { return newStore(t, openDB(t), c) }, outboxtest.Options{Fewer: raceEnabled})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := sqliteoutbox.New(nil, sqliteoutbox.Config{})
	assert.ErrorIs(t, err, outbox.ErrInvalid)
	assert.ErrorContains(t, err, "db")
	_, err = sqliteoutbox.New(openDB(t), sqliteoutbox.Config{Table: "rows; DROP TABLE x"})
	assert.ErrorIs(t, err, outbox.ErrInvalid)
	assert.ErrorContains(t, err, "Table")
}

// Two outboxes in one file, in their own tables, keep their rows and
// their leases apart; CreateTables may run again.
func TestTablesAreApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openDB(t)
	a := newStore(t, db, nil)
	require.NoError(t, a.CreateTables(ctx))
	b, err := sqliteoutbox.New(db, sqliteoutbox.Config{Table: "other_outbox"})
	require.NoError(t, err)
	require.NoError(t, b.CreateTables(ctx))
	require.NoError(t, a.Add(ctx, outbox.Message{ID: "x", Topic: "t", Payload: []byte(`1`)}))
	require.NoError(t, b.Add(ctx, outbox.Message{ID: "x", Topic: "t", Payload: []byte(`2`)}))
	ta, ok, err := a.AcquireLease(ctx, "w1", 60e9)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = b.AcquireLease(ctx, "w2", 60e9)
	require.NoError(t, err)
	assert.True(t, ok, "b's lease is its own")
	rows, err := a.Claim(ctx, ta, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.JSONEq(t, `1`, string(rows[0].Payload))
}

// BenchmarkDrainer measures how many rows a drainer publishes per second
// from a SQLite file:
//
//	go test -run '^$' -bench Drainer ./outbox/sqliteoutbox/
func BenchmarkDrainer(b *testing.B) {
	outboxtest.Bench(b, func(b *testing.B) outbox.Store { return newStore(b, openDB(b), nil) })
}
