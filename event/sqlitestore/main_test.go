package sqlitestore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/event/storetest"
)

func TestMain(m *testing.M) {
	storetest.HelperMain(openShared)
	os.Exit(m.Run())
}

// shared makes files that the processes of storetest.RunProcesses share.
var shared = storetest.Shared{
	New: func(t *testing.T) map[string]string {
		path := filepath.Join(t.TempDir(), "shared.db")
		openStore(t, path) // creates the tables
		return map[string]string{"SQLITESTORE_PATH": path}
	},
	Open: openShared,
}

func openShared(ctx context.Context, getenv func(string) string) (event.Store, func(), error) {
	s, err := sqlitestore.Open(ctx, getenv("SQLITESTORE_PATH"), sqlitestore.Config{PollInterval: 20 * time.Millisecond})
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close(context.Background()) }, nil
}

// TestProcesses runs the multi-process tests of storetest over one file.
func TestProcesses(t *testing.T) {
	t.Parallel()
	storetest.RunProcesses(t, shared)
}
