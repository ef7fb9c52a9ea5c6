package pgstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/event/storetest"
	"github.com/promethean/promlib/internal/testpg"
)

func TestMain(m *testing.M) {
	storetest.HelperMain(openShared)
	os.Exit(m.Run())
}

// newStore returns a store in a new schema, closed and dropped when the
// test ends.
func newStore(t testing.TB, mod ...func(*pgstore.Config)) *pgstore.Store {
	t.Helper()
	return openStore(t, testpg.Schema(t), mod...)
}

func openStore(t testing.TB, schema string, mod ...func(*pgstore.Config)) *pgstore.Store {
	t.Helper()
	cfg := pgstore.Config{Schema: schema, MaxConns: 4}
	for _, m := range mod {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, testpg.URL(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s
}

// shared makes schemas that the processes of storetest.RunProcesses share.
var shared = storetest.Shared{
	New: func(t *testing.T) map[string]string {
		schema := testpg.Schema(t)
		openStore(t, schema) // creates the tables
		return map[string]string{"PG_URL": testpg.URL(t), "PGSTORE_SCHEMA": schema}
	},
	Open: openShared,
}

func openShared(ctx context.Context, getenv func(string) string) (event.Store, func(), error) {
	s, err := pgstore.Open(ctx, getenv("PG_URL"), pgstore.Config{Schema: getenv("PGSTORE_SCHEMA"), MaxConns: 4})
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close(context.Background()) }, nil
}

func TestConformance(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	storetest.Run(t, func(t *testing.T) event.Store { return newStore(t) }, storetest.Options{
		Clocked: func(t *testing.T, clk clock.Clock) event.Store {
			s := newStore(t, func(c *pgstore.Config) { c.Clock = clk })
			// Stores made here stay open until their test ends (the
			// fence tests, a schedule of the simulation): one idle
			// connection each, besides the listener's.
			s.DB().SetMaxIdleConns(1)
			return s
		},
		// Each schedule is a few hundred round trips to the server: 20 of
		// them here, thousands in make soak.
		Schedules: 20,
	})
}

// TestProcesses runs the multi-process tests of storetest over one schema.
func TestProcesses(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	storetest.RunProcesses(t, shared)
}
