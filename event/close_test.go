package event_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// After Close, every call of the Bus returns ErrClosed, and nothing more
// is stored.
func TestCallsAfterCloseReturnErrClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := event.NewMemoryStore()
	b, err := event.NewBus(store, event.Config{})
	require.NoError(t, err)
	_, err = b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	rec, err := b.NewRecord("t", []byte(`2`), event.PublishOptions{})
	require.NoError(t, err)
	select {
	case <-b.Done():
		t.Fatal("Done closed before Close")
	default:
	}

	require.NoError(t, b.Close(ctx))
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed by Close")
	}

	_, err = b.Publish(ctx, "t", []byte(`3`))
	assert.ErrorIs(t, err, event.ErrClosed, "Publish")
	_, err = b.NewRecord("t", []byte(`3`), event.PublishOptions{})
	assert.ErrorIs(t, err, event.ErrClosed, "NewRecord")
	_, err = b.Append(ctx, "t", []event.Record{rec})
	assert.ErrorIs(t, err, event.ErrClosed, "Append")
	_, err = b.Subscribe(ctx, "t", "g", nopHandler)
	assert.ErrorIs(t, err, event.ErrClosed, "Subscribe")
	ref := event.AttemptRef{Topic: "t", Group: "g", ID: rec.ID, Attempt: 1}
	assert.ErrorIs(t, b.Ack(ctx, ref), event.ErrClosed, "Ack")
	assert.ErrorIs(t, b.Nack(ctx, ref, "no"), event.ErrClosed, "Nack")
	assert.ErrorIs(t, b.ModAck(ctx, ref, time.Second), event.ErrClosed, "ModAck")
	_, err = b.Cursor(ctx, "t", "g")
	assert.ErrorIs(t, err, event.ErrClosed, "Cursor")
	_, err = b.ResetCursor(ctx, "t", "g", event.AtSeq(1), false)
	assert.ErrorIs(t, err, event.ErrClosed, "ResetCursor")
	assert.NoError(t, b.Close(ctx), "a second Close")

	head, err := store.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), head, "nothing stored after Close")
}
