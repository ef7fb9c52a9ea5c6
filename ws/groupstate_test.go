package ws

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ratelimit"
)

// TestDroppedConnectionKeepsAcks: 20 events in flight on one connection,
// all but the first acked, the connection dropped (it held the group's
// only subscriber): a new connection gets only the first, at attempt 2.
func TestDroppedConnectionKeepsAcks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	a := e.authed()
	a.subscribe("t", "g", "s", map[string]any{"maxInFlight": 20, "ackTimeoutMs": 60_000})
	p := e.authed()
	var first string
	for i := 0; i < 20; i++ {
		id := p.publish("t", i, fmt.Sprint("p", i)).str("id")
		if i == 0 {
			first = id
		}
	}
	var ids []string
	for i := 0; i < 20; i++ {
		f := a.expectEvent()
		require.Equal(t, float64(1), f.obj("ctx").num("attempt"))
		ids = append(ids, f.obj("event").str("id"))
	}
	for _, id := range ids {
		if id != first {
			a.send(ack("ACK", "t", "g", id, "a"+id))
			a.expectOK("a" + id)
		}
	}
	require.NoError(t, a.c.CloseNow()) // dropped, no close handshake

	b := e.authed()
	b.subscribe("t", "g", "s", map[string]any{"maxInFlight": 20, "ackTimeoutMs": 60_000})
	f := b.expectEvent()
	assert.Equal(t, first, f.obj("event").str("id"), "only the un-acked event comes back")
	assert.Equal(t, float64(2), f.obj("ctx").num("attempt"), "its attempts go on")
	b.send(ack("ACK", "t", "g", first, "a"))
	b.expectOK("a")
	// The next EVENT is a new one: no acked event came back before it.
	last := p.publish("t", "last", "plast").str("id")
	f = b.expectEvent()
	assert.Equal(t, last, f.obj("event").str("id"))
	assert.Equal(t, float64(1), f.obj("ctx").num("attempt"))
}

// TestUnwrittenEventIsNoAttempt: deliveries whose EVENT frame was never
// written (they waited for the delivery rate limit) come back at attempt 1
// when the connection drops; the one that was written counts.
func TestUnwrittenEventIsNoAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.RateLimits.Deliver = ratelimit.Limit{Rate: 0.001, Burst: 1} })
	a := e.authed()
	a.subscribe("t", "g", "s", map[string]any{"maxInFlight": 5, "ackTimeoutMs": 60_000})
	ctx := context.Background()
	var recs []event.Record
	for i := 0; i < 5; i++ {
		r, err := e.bus.Publish(ctx, "t", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		recs = append(recs, r)
	}
	f := a.expectEvent()
	require.Equal(t, recs[0].ID, f.obj("event").str("id"))
	require.Eventually(t, func() bool {
		st := e.bus.Stats()
		return len(st) == 1 && st[0].InFlight == 5
	}, 5*time.Second, 5*time.Millisecond, "the other four wait in the gateway for the rate limit")
	require.NoError(t, a.c.CloseNow())

	got := make(chan *event.Delivery, 5)
	sub, err := e.bus.Subscribe(ctx, "t", "g", func(_ context.Context, d *event.Delivery) error {
		got <- d
		return nil
	})
	require.NoError(t, err)
	defer sub.Close()
	for range 5 {
		var d *event.Delivery
		select {
		case d = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("not every delivery came back")
		}
		want := 1
		if d.ID == recs[0].ID {
			want = 2 // its EVENT was written
		}
		assert.Equal(t, want, d.Attempt, "seq %d", d.Seq)
	}
}
