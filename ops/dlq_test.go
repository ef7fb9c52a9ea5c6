package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
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

// failingGroup subscribes group on orders with a handler that fails each
// record the first time (it is dead-lettered at once) and acks its
// redrive.
func failingGroup(t *testing.T, bus *event.Bus, group string, opts ...event.SubscribeOption) *collected {
	t.Helper()
	var got collected
	_, err := bus.Subscribe(context.Background(), "orders", group, func(ctx context.Context, d *event.Delivery) error {
		got.add(d.Record)
		if d.Headers[event.HeaderRedriveID] == "" {
			return assert.AnError
		}
		return nil
	}, append([]event.SubscribeOption{event.WithMaxAttempts(1)}, opts...)...)
	require.NoError(t, err)
	return &got
}

// The dead letters of a group over HTTP ([event.Bus.DeadLetters] and its
// redrive and purge, tested in package event): GET /ops/dlq pages them
// oldest first; POST /ops/dlq/redrive and /ops/dlq/purge take ids in the
// query or a JSON body, or the oldest limit ones; an id that is not one of
// the group's dead letters is 404, a bad limit 400.
func TestDLQOverHTTP(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus})
	ctx := context.Background()
	billing := failingGroup(t, bus, "billing")
	var originals []event.Record
	for i := range 4 {
		r, err := bus.Publish(ctx, "orders", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		originals = append(originals, r)
	}

	var dlq event.DeadLetterPage
	require.Eventually(t, func() bool {
		getJSON(t, h, "/ops/dlq?topic=orders&group=billing", &dlq)
		return len(dlq.Records) == 4
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, event.DeadLetterSummary{Topic: "orders.dlq", Head: 4, Pending: 4}, dlq.DeadLetters)
	for i, r := range dlq.Records {
		assert.Equal(t, originals[i].ID, r.Headers[event.HeaderDLQID])
	}
	var page event.DeadLetterPage
	getJSON(t, h, "/ops/dlq?topic=orders&group=billing&limit=2", &page)
	require.Len(t, page.Records, 2)
	assert.Equal(t, uint64(2), page.Next)
	getJSON(t, h, "/ops/dlq?topic=orders&group=billing&after=2&limit=2", &page)
	assert.Equal(t, dlq.Records[2:], page.Records)
	var none event.DeadLetterPage
	getJSON(t, h, "/ops/dlq?topic=orders&group=audit", &none)
	assert.Empty(t, none.Records)

	w := do(t, h, http.MethodPost, "/ops/dlq/redrive", `{"topic":"orders","group":"billing","ids":"`+dlq.Records[1].ID+`"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var res event.DeadLetterResult
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &res))
	assert.Equal(t, []string{dlq.Records[1].ID}, res.IDs)
	require.Len(t, res.Records, 1)
	require.Eventually(t, func() bool { return billing.n() == 5 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, originals[1].ID, billing.all()[4].ID)

	w = do(t, h, http.MethodPost, "/ops/dlq/purge?topic=orders&group=billing&ids="+dlq.Records[0].ID, "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = do(t, h, http.MethodPost, "/ops/dlq/redrive?topic=orders&group=billing&limit=1", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &res))
	assert.Equal(t, []string{dlq.Records[2].ID}, res.IDs, "the oldest one left")
	getJSON(t, h, "/ops/dlq?topic=orders&group=billing", &page)
	assert.Equal(t, dlq.Records[3:], page.Records)
	assert.Equal(t, uint64(1), page.DeadLetters.Pending)

	w = do(t, h, http.MethodPost, "/ops/dlq/redrive?topic=orders&group=billing&ids="+dlq.Records[0].ID, "")
	assert.Equal(t, http.StatusNotFound, w.Code, "done already: %s", w.Body.String())
	assert.Contains(t, w.Body.String(), dlq.Records[0].ID)
	w = do(t, h, http.MethodPost, "/ops/dlq/purge?topic=orders&group=billing&limit=0", "")
	assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
}

// A group's own dead-letter topic (its setting DeadLetterTopic) is the one
// /ops/dlq reads; the topic's view sums the dead letters of its groups.
func TestDLQOfAGroupWithItsOwnDeadLetterTopic(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus})
	ctx := context.Background()
	failingGroup(t, bus, "billing", event.WithDeadLetterTopic("billing-failed"))
	failingGroup(t, bus, "audit")
	for i := range 2 {
		_, err := bus.Publish(ctx, "orders", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	var dlq event.DeadLetterPage
	require.Eventually(t, func() bool {
		getJSON(t, h, "/ops/dlq?topic=orders&group=billing", &dlq)
		return len(dlq.Records) == 2
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, event.DeadLetterSummary{Topic: "billing-failed", Head: 2, Pending: 2}, dlq.DeadLetters)
	for _, r := range dlq.Records {
		assert.Equal(t, "billing-failed", r.Topic)
	}
	var topics ops.TopicsResponse
	require.Eventually(t, func() bool {
		getJSON(t, h, "/ops/topics?topic=orders", &topics)
		return topics.Topics[0].DLQ.Pending == 4
	}, 10*time.Second, 10*time.Millisecond, "the dead letters of both groups")
	assert.Equal(t, "orders.dlq", topics.Topics[0].DLQ.Topic)
	assert.Equal(t, uint64(2), topics.Topics[0].DLQ.Head, "audit's, in the default dead-letter topic")
	require.Len(t, topics.Topics[0].Groups, 2)
	assert.Equal(t, "billing-failed", topics.Topics[0].Groups[1].DeadLetters.Topic)
}
