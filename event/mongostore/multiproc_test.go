package mongostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/event/storetest"
)

// shared makes databases that the processes of storetest.RunProcesses
// share.
var shared = storetest.Shared{
	New: func(t *testing.T) map[string]string {
		client(t)
		db := testDB(t)
		newStoreIn(t, db, nil) // with its indexes
		return map[string]string{"MONGO_URL": mongoURL(t), "HELPER_DB": db}
	},
	Open:  openShared,
	Fewer: true,
}

func openShared(ctx context.Context, getenv func(string) string) (event.Store, func(), error) {
	s, err := mongostore.Connect(ctx, getenv("MONGO_URL"), mongostore.Config{
		Database:     getenv("HELPER_DB"),
		PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		return nil, nil, err
	}
	closeStore := func() { _ = s.Close(context.Background()) }
	if err := s.EnsureIndexes(ctx); err != nil {
		closeStore()
		return nil, nil, err
	}
	return s, closeStore, nil
}

// TestProcesses runs the multi-process tests of storetest: consumer and
// publisher processes killed with SIGKILL over one database.
func TestProcesses(t *testing.T) {
	client(t) // skip (or fail under CI) before the processes start
	t.Parallel()
	storetest.RunProcesses(t, shared)
}
