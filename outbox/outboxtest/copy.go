package outboxtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/outbox"
)

// CopyStore is an outbox store that [outbox.Copy] copies into and from.
type CopyStore interface {
	outbox.Store
	outbox.PendingLister
}

// CheckCopy moves the pending rows of an outbox into store, an empty one,
// and from there into another: the same messages in the same order, sent
// and failed rows left behind, nothing added twice by a second copy.
func CheckCopy(t *testing.T, store CopyStore) {
	t.Helper()
	ctx := context.Background()
	first := outbox.NewMemoryStore()
	for i := range 4 {
		require.NoError(t, first.Add(ctx, outbox.Message{ID: fmt.Sprintf("m%d", i), Topic: "orders", Key: "k",
			Headers: map[string]string{"n": fmt.Sprint(i)}, Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}))
	}
	tok, ok, err := first.AcquireLease(ctx, "w", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, first.MarkSent(ctx, tok, "m0"))
	require.NoError(t, first.MarkRetry(ctx, tok, outbox.Retry{ID: "m1", Err: "no", Final: true}))

	rep, err := outbox.Copy(ctx, store, first)
	require.NoError(t, err)
	assert.Equal(t, outbox.CopyReport{Copied: 2}, rep)
	rep, err = outbox.Copy(ctx, store, first)
	require.NoError(t, err)
	assert.Equal(t, outbox.CopyReport{Present: 2}, rep, "a second copy adds nothing")

	last := outbox.NewMemoryStore()
	rep, err = outbox.Copy(ctx, last, store)
	require.NoError(t, err)
	assert.Equal(t, outbox.CopyReport{Copied: 2}, rep)
	rows, err := last.PendingRows(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for i, r := range rows {
		s, err := first.Row(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("m%d", i+2), r.ID)
		assert.Equal(t, s.Message, r.Message)
	}
}
