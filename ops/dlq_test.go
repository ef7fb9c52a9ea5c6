package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

type collected struct {
	mu   sync.Mutex
	recs []event.Record
}

func (c *collected) add(r event.Record) { c.mu.Lock(); c.recs = append(c.recs, r); c.mu.Unlock() }
func (c *collected) n() int             { c.mu.Lock(); defer c.mu.Unlock(); return len(c.recs) }
func (c *collected) all() []event.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event.Record(nil), c.recs...)
}

// A group's dead letters are its own: its DLQ lists them, a redrive
// delivers them again to it only (the other group, which acked them,
// never sees them again), each once; a purge drops them unredriven.
func TestRedriveToTheFailingGroupOnly(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus})
	ctx := context.Background()

	var billing, audit collected
	_, err := bus.Subscribe(ctx, "orders", "billing", func(ctx context.Context, d *event.Delivery) error {
		billing.add(d.Record)
		if d.Headers[event.HeaderRedriveID] == "" {
			return assert.AnError // first time round: fail, and dead-letter at once
		}
		return nil
	}, event.WithMaxAttempts(1))
	require.NoError(t, err)
	_, err = bus.Subscribe(ctx, "orders", "audit", func(ctx context.Context, d *event.Delivery) error {
		audit.add(d.Record)
		return nil
	})
	require.NoError(t, err)

	var originals []event.Record
	for i, key := range []string{"k1", "k2", "k3", "k4"} {
		r, err := bus.Publish(ctx, "orders", []byte(`{"i":`+string(rune('0'+i))+`}`), event.WithKey(key))
		require.NoError(t, err)
		originals = append(originals, r)
	}

	var dlq ops.DLQResponse
	require.Eventually(t, func() bool {
		getJSON(t, h, "/ops/dlq?topic=orders&group=billing", &dlq)
		return len(dlq.Records) == 4
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "orders.dlq", dlq.DLQ.Topic)
	assert.Equal(t, uint64(4), dlq.DLQ.Pending)
	for i, r := range dlq.Records {
		assert.Equal(t, originals[i].ID, r.Headers[event.HeaderDLQID])
		assert.Equal(t, "billing", r.Headers[event.HeaderDLQGroup])
	}
	var none ops.DLQResponse
	getJSON(t, h, "/ops/dlq?topic=orders&group=audit", &none)
	assert.Empty(t, none.Records, "audit failed nothing")

	var page ops.DLQResponse
	getJSON(t, h, "/ops/dlq?topic=orders&group=billing&limit=2", &page)
	require.Len(t, page.Records, 2)
	assert.Equal(t, uint64(2), page.Next)
	getJSON(t, h, "/ops/dlq?topic=orders&group=billing&after=2&limit=2", &page)
	require.Len(t, page.Records, 2)
	require.Eventually(t, func() bool { return audit.n() == 4 }, 10*time.Second, 10*time.Millisecond)

	// Redrive one selected record.
	w := do(t, h, http.MethodPost, "/ops/dlq/redrive", `{"topic":"orders","group":"billing","ids":"`+dlq.Records[1].ID+`"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var res ops.DLQActionResult
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &res))
	assert.Equal(t, []string{dlq.Records[1].ID}, res.IDs)
	require.Eventually(t, func() bool { return billing.n() == 5 }, 10*time.Second, 10*time.Millisecond)
	got := billing.all()[4]
	assert.Equal(t, "orders", got.Topic)
	assert.Equal(t, originals[1].ID, got.ID)
	assert.Equal(t, originals[1].Seq, got.Seq)

	// Purge one, redrive the rest.
	w = do(t, h, http.MethodPost, "/ops/dlq/purge", `{"topic":"orders","group":"billing","ids":"`+dlq.Records[0].ID+`"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = do(t, h, http.MethodPost, "/ops/dlq/redrive?topic=orders&group=billing", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &res))
	assert.Equal(t, []string{dlq.Records[2].ID, dlq.Records[3].ID}, res.IDs)
	require.Eventually(t, func() bool { return billing.n() == 7 }, 10*time.Second, 10*time.Millisecond)
	ids := map[string]bool{}
	for _, r := range billing.all()[4:] {
		ids[r.ID] = true
	}
	assert.Equal(t, map[string]bool{originals[1].ID: true, originals[2].ID: true, originals[3].ID: true}, ids)

	getJSON(t, h, "/ops/dlq?topic=orders&group=billing", &dlq)
	assert.Empty(t, dlq.Records)
	assert.Zero(t, dlq.DLQ.Pending)
	res, err = h.Redrive(ctx, "orders", "billing", nil, 100)
	require.NoError(t, err)
	assert.Empty(t, res.IDs, "each record is redriven once")
	_, err = h.Redrive(ctx, "orders", "billing", []string{originals[0].ID}, 100)
	assert.ErrorIs(t, err, ops.ErrNotFound, "not an id of the DLQ")

	// The other group got every record once; a last publish shows it is
	// alive and caught up.
	_, err = bus.Publish(ctx, "orders", []byte(`{"i":9}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return audit.n() == 5 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 5, audit.n())
	for _, r := range audit.all() {
		assert.Empty(t, r.Headers[event.HeaderRedriveID])
	}

	_, err = h.Redrive(ctx, "orders", "billing", nil, 0)
	assert.ErrorIs(t, err, ops.ErrInvalid)
	_, err = h.Redrive(ctx, "a b", "billing", nil, 1)
	assert.ErrorIs(t, err, event.ErrInvalid)
}
