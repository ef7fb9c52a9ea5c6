package pgstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/internal/testpg"
)

// TestNotifyWakesOtherStores appends through one store and waits for the
// watcher of another store on the same schema, whose polling is off: only
// the NOTIFY sent in the append transaction ("HEAD TOPIC") can wake it. A
// notice that names a bare topic (no head) wakes the watchers too.
func TestNotifyWakesOtherStores(t *testing.T) {
	t.Parallel()
	schema := testpg.Schema(t)
	noPoll := func(c *pgstore.Config) { c.PollInterval = time.Hour }
	a, b := openStore(t, schema, noPoll), openStore(t, schema, noPoll)
	ctx := context.Background()
	ch, stop := b.Watch("t.notify")
	defer stop()
	woken := func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	woken() // the poller's first look at the head may have woken it

	for i, id := range []string{"a", "b"} {
		_, err := a.Append(ctx, "t.notify", []event.Record{{ID: id, Topic: "t.notify", TS: 1, Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
		require.Eventually(t, woken, 10*time.Second, 5*time.Millisecond, "append %d wakes the other store's watcher", i+1)
		head, err := b.Head(ctx, "t.notify")
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), head)
	}

	_, err := a.DB().ExecContext(ctx, `SELECT pg_notify($1, 't.notify')`, "promlib:"+schema)
	require.NoError(t, err)
	require.Eventually(t, woken, 10*time.Second, 5*time.Millisecond, "a bare topic wakes the watcher")
}
