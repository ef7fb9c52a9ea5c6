package sqliteoutbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/outbox"
)

// TestCopy moves the pending rows of one SQLite outbox into another: the
// same messages in the same order, sent and failed rows left, nothing
// added twice by a second copy.
func TestCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newStore(t, openDB(t), nil)
	for i := range 4 {
		require.NoError(t, src.Add(ctx, outbox.Message{ID: fmt.Sprintf("m%d", i), Topic: "orders", Key: "k",
			Headers: map[string]string{"n": fmt.Sprint(i)}, Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}))
	}
	tok, ok, err := src.AcquireLease(ctx, "w", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, src.MarkSent(ctx, tok, "m0"))
	require.NoError(t, src.MarkRetry(ctx, tok, outbox.Retry{ID: "m1", Err: "no", Final: true}))

	dst := newStore(t, openDB(t), nil)
	rep, err := outbox.Copy(ctx, dst, src)
	require.NoError(t, err)
	assert.Equal(t, outbox.CopyReport{Copied: 2}, rep)
	rows, err := dst.PendingRows(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for i, r := range rows {
		s, err := src.Row(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("m%d", i+2), r.ID)
		assert.Equal(t, s.Message, r.Message)
	}
	rep, err = outbox.Copy(ctx, dst, src)
	require.NoError(t, err)
	assert.Equal(t, outbox.CopyReport{Present: 2}, rep)
}
