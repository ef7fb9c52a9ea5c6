package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// Records that failed their last attempt are dead-lettered; a redrive
// publishes them back, they are delivered again and acked, and each is
// redriven once.
func TestRedrive(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus})
	ctx := context.Background()

	var mu sync.Mutex
	var redriven []*event.Delivery
	_, err := bus.Subscribe(ctx, "orders", "billing", func(ctx context.Context, d *event.Delivery) error {
		if d.Headers[ops.HeaderRedriveID] == "" {
			return assert.AnError // first time round: fail, and dead-letter at once
		}
		mu.Lock()
		redriven = append(redriven, d)
		mu.Unlock()
		return nil
	}, event.WithMaxAttempts(1))
	require.NoError(t, err)

	var originals []event.Record
	for i, key := range []string{"k1", "k2", "k3"} {
		r, err := bus.Publish(ctx, "orders", []byte(`{"i":`+string(rune('0'+i))+`}`),
			event.WithKey(key), event.WithHeaders(map[string]string{"trace": key}))
		require.NoError(t, err)
		originals = append(originals, r)
	}

	var dlq ops.DLQResponse
	require.Eventually(t, func() bool {
		getJSON(t, h, "/ops/dlq?topic=orders", &dlq)
		// The head is read before the page: wait until both show all three.
		return len(dlq.Records) == 3 && dlq.DLQ.Head == 3
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "orders.dlq", dlq.DLQ.Topic)
	assert.Equal(t, uint64(3), dlq.DLQ.Head)
	assert.Equal(t, uint64(3), dlq.DLQ.Pending)
	assert.Zero(t, dlq.DLQ.Redriven)
	for i, r := range dlq.Records {
		assert.Equal(t, originals[i].ID, r.Headers[event.HeaderDLQID])
		assert.Equal(t, "billing", r.Headers[event.HeaderDLQGroup])
		assert.NotEmpty(t, r.Headers[event.HeaderDLQReason])
	}

	// Peek a page at a time.
	var page ops.DLQResponse
	getJSON(t, h, "/ops/dlq?topic=orders&after=0&limit=2", &page)
	require.Len(t, page.Records, 2)
	assert.Equal(t, uint64(2), page.Next)
	getJSON(t, h, "/ops/dlq?topic=orders&after=2&limit=2", &page)
	require.Len(t, page.Records, 1)
	assert.Zero(t, page.Next)

	w := do(t, h, http.MethodPost, "/ops/dlq/redrive", `{"topic":"orders"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var res ops.RedriveResult
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &res))
	assert.Equal(t, 3, res.Redriven)
	assert.Zero(t, res.Skipped)
	assert.Equal(t, uint64(3), res.Cursor)
	assert.Zero(t, res.Pending)
	require.Len(t, res.Records, 3)
	for i, rr := range res.Records {
		assert.Equal(t, originals[i].ID, rr.OriginalID)
		assert.NotEqual(t, originals[i].ID, rr.ID, "a redriven record has a new id")
		assert.Equal(t, uint64(4+i), rr.Seq)
	}

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(redriven) == 3
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	for i, d := range redriven {
		o := originals[i]
		assert.Equal(t, o.Key, d.Key)
		assert.JSONEq(t, string(o.Payload), string(d.Payload))
		assert.Equal(t, o.ID, d.Headers[ops.HeaderRedriveID])
		assert.Equal(t, "billing", d.Headers[ops.HeaderRedriveGroup])
		assert.Equal(t, o.Key, d.Headers["trace"])
		for k := range d.Headers {
			assert.False(t, strings.HasPrefix(k, "x-dlq-"), "header %s was copied", k)
		}
		assert.Equal(t, res.Records[i].DLQID, d.CausedBy[0])
	}
	mu.Unlock()

	// Acked: the group catches up, nothing more is dead-lettered.
	var lag event.GroupLag
	require.Eventually(t, func() bool {
		getJSON(t, h, "/ops/lag?topic=orders&group=billing", &lag)
		return lag.Lag == 0 && lag.Head == 6
	}, 10*time.Second, 10*time.Millisecond)
	getJSON(t, h, "/ops/dlq?topic=orders", &dlq)
	assert.Empty(t, dlq.Records)
	assert.Equal(t, uint64(3), dlq.DLQ.Head)
	assert.Equal(t, uint64(3), dlq.DLQ.Redriven)

	// Once only: a second redrive finds nothing.
	res, err = h.Redrive(ctx, "orders", 100)
	require.NoError(t, err)
	assert.Zero(t, res.Redriven)

	// Even with the cursor lost, the derived ids store nothing twice.
	require.NoError(t, bus.SetCursor(ctx, "orders.dlq", ops.DefaultRedriveGroup, 0))
	res, err = h.Redrive(ctx, "orders", 100)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Redriven)
	head, err := bus.Store().Head(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, uint64(6), head)
}

// Redrive moves at most limit records and passes over those dead-lettered
// from another topic.
func TestRedriveLimitAndSkip(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus})
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		from := "a"
		if i == 1 {
			from = "b"
		}
		_, err := bus.Publish(ctx, "a.dlq", []byte(`1`), event.WithHeaders(map[string]string{
			event.HeaderDLQTopic: from, event.HeaderDLQID: "x",
		}))
		require.NoError(t, err)
	}
	res, err := h.Redrive(ctx, "a", 3)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Redriven)
	assert.Equal(t, 1, res.Skipped)
	assert.Equal(t, uint64(3), res.Cursor)
	assert.Equal(t, uint64(2), res.Pending)

	w := do(t, h, http.MethodPost, "/ops/dlq/redrive?topic=a&limit=10", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &res))
	assert.Equal(t, 2, res.Redriven)
	assert.Equal(t, uint64(5), res.Cursor)
	head, err := bus.Store().Head(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, uint64(4), head)

	_, err = h.Redrive(ctx, "a", 0)
	assert.ErrorIs(t, err, ops.ErrInvalid)
	_, err = h.Redrive(ctx, "a b", 1)
	assert.ErrorIs(t, err, event.ErrInvalid)
}
