package pgoutbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/outboxtest"
	"github.com/promethean/promlib/outbox/pgoutbox"
)

func newStore(t testing.TB, pool *pgxpool.Pool, c clock.Clock) *pgoutbox.Store {
	t.Helper()
	s, err := pgoutbox.New(pool, pgoutbox.Config{Clock: c})
	require.NoError(t, err)
	require.NoError(t, s.CreateTables(context.Background()))
	return s
}

func TestConformance(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	outboxtest.Run(t, func(t *testing.T, c clock.Clock) outboxtest.Store {
		pool, _ := testpg.Pool(t)
		return newStore(t, pool, c)
	}, outboxtest.Options{})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := pgoutbox.New(nil, pgoutbox.Config{})
	assert.ErrorIs(t, err, outbox.ErrInvalid)
	assert.ErrorContains(t, err, "pool")
}

// Processes starting together create the tables once, without an error.
func TestCreateTablesConcurrently(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	pool, _ := testpg.Pool(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := pgoutbox.New(pool, pgoutbox.Config{})
			if err == nil {
				err = s.CreateTables(context.Background())
			}
			errs <- err
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	s := newStore(t, pool, nil)
	require.NoError(t, s.Add(context.Background(), outbox.Message{Topic: "t", Payload: []byte(`1`)}))
	st, err := s.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, outbox.Stats{Pending: 1}, st)
}

// BenchmarkDrainer measures how many rows a drainer publishes per second
// from PostgreSQL:
//
//	tools/pgtest/with-postgres.sh go test -run '^$' -bench Drainer ./outbox/pgoutbox/
func BenchmarkDrainer(b *testing.B) {
	pool, _ := testpg.Pool(b)
	outboxtest.Bench(b, func(b *testing.B) outbox.Store { return newStore(b, pool, nil) })
}
