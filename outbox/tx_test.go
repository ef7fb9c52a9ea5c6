package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/txn"
)

// Rows added in a memory transaction are published when it commits, and
// never when it rolls back or is abandoned before the commit (the
// process died): the memory twin of mongooutbox's transaction test.
func TestMemoryStoreAddInTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ob := outbox.NewMemoryStore()
	es := event.NewMemoryStore()
	bus, err := event.NewBus(es, event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	d, err := outbox.NewDrainer(outbox.Config{Store: ob, Bus: bus, PollInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	tx := txn.NewMemory()
	msg := func(id string) outbox.Message {
		return outbox.Message{ID: id, Topic: "order.created", Payload: []byte(`{}`)}
	}
	require.NoError(t, tx.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, ob.Add(ctx, msg("committed")))
		_, err := ob.Row(context.Background(), "committed")
		assert.Error(t, err, "not visible before the commit")
		st, err := ob.Stats(context.Background())
		require.NoError(t, err)
		assert.Equal(t, outbox.Stats{}, st)
		return nil
	}))

	errAbort := errors.New("abort")
	err = tx.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, ob.Add(ctx, msg("rolled-back")))
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)

	killed, kill := context.WithCancel(ctx)
	err = tx.InTx(killed, func(ctx context.Context) error {
		require.NoError(t, ob.Add(ctx, msg("abandoned")))
		kill() // the process dies before the commit
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)

	// A commit whose id was taken meanwhile stores none of its rows.
	err = tx.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, ob.Add(ctx, msg("conflict-a"), msg("conflict-b")))
		return ob.Add(context.Background(), msg("conflict-b")) // outside the transaction
	})
	require.ErrorIs(t, err, outbox.ErrInvalid)
	_, err = ob.Row(ctx, "conflict-a")
	assert.Error(t, err, "the conflicting commit stored nothing")

	require.NoError(t, ob.Add(ctx, msg("last")))
	require.Eventually(t, func() bool {
		st, err := ob.Stats(ctx)
		return err == nil && st == outbox.Stats{Sent: 3}
	}, 10*time.Second, 5*time.Millisecond)
	recs, err := es.Read(ctx, "order.created", 0, 100)
	require.NoError(t, err)
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	assert.ElementsMatch(t, []string{"committed", "conflict-b", "last"}, ids)
}
