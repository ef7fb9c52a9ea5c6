package mongostore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/event/storetest"
)

func TestCopy(t *testing.T) {
	client(t)
	t.Parallel()
	storetest.RunCopy(t, func(t *testing.T) event.Store { return newStore(t) })
}

// TestCopySQLiteToMongoAndBack moves a SQLite file into MongoDB and from
// there into another SQLite file: each copy is equal record for record,
// settings, cursors and group state, and the consumers continue where
// they were in MongoDB and in the last file.
func TestCopySQLiteToMongoAndBack(t *testing.T) {
	client(t)
	t.Parallel()
	first := openSQLite(t)
	sc := storetest.FillForCopy(t, first)
	m := newStore(t)
	storetest.CopyAndCheck(t, m, first)
	last := openSQLite(t)
	storetest.CopyAndCheck(t, last, m)
	storetest.CheckCopied(t, last, first)
	storetest.CheckContinues(t, last, sc)
	storetest.CheckContinues(t, m, sc)
}

func openSQLite(t *testing.T) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlitestore.Config{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s
}
