package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/outbox"
)

// fillForCopy adds five messages to s: one sent
// and one failed by a drainer, three left pending, whose ids it returns.
func fillForCopy(t *testing.T, s outbox.Store) []string {
	t.Helper()
	ctx := context.Background()
	var msgs []outbox.Message
	for i := range 5 {
		msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("m%d", i), Topic: "orders", Key: fmt.Sprintf("k%d", i%2),
			Headers: map[string]string{"n": fmt.Sprint(i)}, Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	require.NoError(t, s.Add(ctx, msgs...))
	tok, ok, err := s.AcquireLease(ctx, "w", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.MarkSent(ctx, tok, "m0"))
	require.NoError(t, s.MarkRetry(ctx, tok, outbox.Retry{ID: "m1", Err: "no", Final: true}))
	return []string{"m2", "m3", "m4"}
}

func pendingIDs(t *testing.T, s outbox.PendingLister) []string {
	t.Helper()
	rows, err := s.PendingRows(context.Background())
	require.NoError(t, err)
	ids := []string{}
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := outbox.NewMemoryStore()
	want := fillForCopy(t, src)
	dst := outbox.NewMemoryStore()
	// A copy interrupted after its first row.
	first, err := src.Row(ctx, "m2")
	require.NoError(t, err)
	require.NoError(t, dst.Add(ctx, first.Message))

	rep, err := outbox.Copy(ctx, dst, src)
	require.NoError(t, err)
	assert.Equal(t, outbox.CopyReport{Copied: 2, Present: 1}, rep)
	assert.Equal(t, want, pendingIDs(t, dst), "the pending rows, in their order; no sent or failed one")
	for _, id := range want {
		s, err := src.Row(ctx, id)
		require.NoError(t, err)
		d, err := dst.Row(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, s.Message, d.Message)
	}
	rep, err = outbox.Copy(ctx, dst, src)
	require.NoError(t, err)
	assert.Equal(t, outbox.CopyReport{Present: 3}, rep, "a second copy adds nothing")

	_, err = outbox.Copy(ctx, onlyStore{dst}, src)
	require.ErrorIs(t, err, outbox.ErrInvalid)
	assert.Contains(t, err.Error(), "PendingLister")
}

// onlyStore is an outbox.Store that does not list its rows.
type onlyStore struct{ outbox.Store }
