package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/event/storetest"
)

// newStore returns a store in a new file of the test's temp dir, closed
// when the test ends.
func newStore(t testing.TB, mod ...func(*sqlitestore.Config)) *sqlitestore.Store {
	t.Helper()
	return openStore(t, filepath.Join(t.TempDir(), "events.db"), mod...)
}

func openStore(t testing.TB, path string, mod ...func(*sqlitestore.Config)) *sqlitestore.Store {
	t.Helper()
	cfg := sqlitestore.Config{Synchronous: "NORMAL"}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := sqlitestore.Open(context.Background(), path, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	// Fewer under the race detector, which instruments the pure-Go SQLite:
	// each record costs milliseconds of CPU there. The memory store runs
	// the full counts over the same Bus, and so does this suite without
	// -race.
	storetest.Run(t, func(t *testing.T) event.Store { return newStore(t) }, storetest.Options{
		Fewer: raceEnabled,
		Clocked: func(t *testing.T, clk clock.Clock) event.Store {
			return newStore(t, func(c *sqlitestore.Config) { c.Clock = clk })
		},
	})
}
