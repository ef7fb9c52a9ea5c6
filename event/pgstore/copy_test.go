package pgstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/event/storetest"
	"github.com/promethean/promlib/internal/testpg"
)

func TestCopy(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	storetest.RunCopy(t, func(t *testing.T) event.Store { return newStore(t) })
}

// TestCopySQLiteToPostgresAndBack moves a SQLite file into PostgreSQL and
// from there into another SQLite file: each copy is equal record for
// record, settings, cursors and group state, and the consumers continue
// where they were in the last one.
func TestCopySQLiteToPostgresAndBack(t *testing.T) {
	testpg.URL(t)
	t.Parallel()
	first := openSQLite(t)
	sc := storetest.FillForCopy(t, first)
	pg := newStore(t)
	storetest.CopyAndCheck(t, pg, first)
	last := openSQLite(t)
	storetest.CopyAndCheck(t, last, pg)
	storetest.CheckCopied(t, last, first)
	storetest.CheckContinues(t, last, sc)
}

func openSQLite(t *testing.T) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlitestore.Config{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s
}
