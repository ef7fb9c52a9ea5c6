package ws

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// publishKeyed publishes n events of key k over the wire, with payloads
// "k1".."kn", and returns their ids in order.
func publishKeyed(p *raw, topic, k string, n int) []string {
	p.t.Helper()
	ids := make([]string, n)
	for i := range n {
		corr := fmt.Sprintf("p-%s%d", k, i+1)
		p.send(map[string]any{"op": "PUBLISH", "topic": topic, "payload": fmt.Sprintf("%s%d", k, i+1), "opts": map[string]any{"key": k}, "corr": corr})
		ids[i] = p.expectOK(corr).str("id")
	}
	return ids
}

// keyedReader reads the EVENTs of one raw subscription, skipping the OK
// answers to its own ACK and NACK, and checks on each EVENT that the
// client holds no other unsettled EVENT of its key.
type keyedReader struct {
	r            *raw
	topic, group string
	open         map[string]string // key -> id sent and not settled
	okDue        int
	n            int
}

func (k *keyedReader) next(recv func() frame) frame {
	k.r.t.Helper()
	for {
		f := recv()
		switch f.str("op") {
		case "OK":
			require.Positive(k.r.t, k.okDue, "unexpected OK %v", f)
			k.okDue--
			continue
		case "EVENT":
		default:
			k.r.t.Fatalf("want EVENT or OK, got %v", f)
		}
		ev := f.obj("event")
		key := ev.str("key")
		require.NotEmpty(k.r.t, key)
		other, busy := k.open[key]
		require.False(k.r.t, busy, "EVENT %s of key %q sent while %s of that key was not settled", ev.str("id"), key, other)
		k.open[key] = ev.str("id")
		return f
	}
}

func (k *keyedReader) settle(op string, f frame) {
	ev := f.obj("event")
	delete(k.open, ev.str("key"))
	k.n++
	k.r.send(ack(op, k.topic, k.group, ev.str("id"), "s"+strconv.Itoa(k.n)))
	k.okDue++
}

// TestKeyOrderedOverTheWire: with keyOrdered, a key whose first event is
// nacked three times gets its events in order, one at a time, while the
// other keys flow on; the key holds at most maxPerKey events in the
// server. The backoffs run on the fake clock.
func TestKeyOrderedOverTheWire(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	e := newEnv(t, func(c *Config) { c.Clock = clk })
	p := e.authed()
	ids := map[string][]string{
		"a": publishKeyed(p, "orders", "a", 5),
		"b": publishKeyed(p, "orders", "b", 3),
		"c": publishKeyed(p, "orders", "c", 3),
	}
	r := e.authed()
	r.subscribe("orders", "g", "sub", map[string]any{"from": "earliest", "keyOrdered": true, "maxPerKey": 3, "maxInFlight": 6})
	k := &keyedReader{r: r, topic: "orders", group: "g", open: map[string]string{}}
	got := map[string][]string{}

	// The clock stands still: a1's redelivery is not due, and the events
	// of b and c still come, each after the one before it of its key.
	for len(got["b"])+len(got["c"]) < 6 || len(got["a"]) == 0 {
		f := k.next(r.recv)
		ev := f.obj("event")
		got[ev.str("key")] = append(got[ev.str("key")], ev.str("id"))
		if ev.str("key") == "a" {
			k.settle("NACK", f)
		} else {
			k.settle("ACK", f)
		}
	}
	assert.Equal(t, ids["b"], got["b"])
	assert.Equal(t, ids["c"], got["c"])
	assert.Equal(t, ids["a"][:1], got["a"], "only a's head while it backs off")
	// a1 backs off, a2 and a3 are held behind it (maxPerKey 3), a4 and a5
	// are not taken from the read buffer.
	require.Eventually(t, func() bool {
		for _, st := range e.bus.Stats() {
			if st.Topic == "orders" && st.Group == "g" {
				return st.InFlight == 0 && st.Held == 2 && st.Waiting == 3
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "stats %+v", e.bus.Stats())

	// a1 comes again on the clock's backoff, twice nacked more, then a2..a5.
	recv := func() frame { return recvAdvancing(r, clk, 10*time.Millisecond) }
	for attempt := 2; attempt <= 4; attempt++ {
		f := k.next(recv)
		require.Equal(t, ids["a"][0], f.obj("event").str("id"), "a1 again before anything else of a")
		require.Equal(t, float64(attempt), f.obj("ctx").num("attempt"))
		if attempt < 4 {
			k.settle("NACK", f)
		} else {
			k.settle("ACK", f)
		}
	}
	got["a"] = nil
	for range 4 {
		f := k.next(r.recv)
		assert.Equal(t, float64(1), f.obj("ctx").num("attempt"))
		got["a"] = append(got["a"], f.obj("event").str("id"))
		k.settle("ACK", f)
	}
	assert.Equal(t, ids["a"][1:], got["a"])
	for k.okDue > 0 {
		r.expectOK("s" + strconv.Itoa(k.n-k.okDue+1))
		k.okDue--
	}
	r.noFrameFor(20 * time.Millisecond)
}

// TestKeyOrderedBadOpts: bad keyOrdered and maxPerKey are answered ERR
// bad_frame naming the field, and the connection goes on.
func TestKeyOrderedBadOpts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.MaxInFlight = 20 })
	r := e.authed()
	tests := []struct {
		name, opts, field string
	}{
		{"maxPerKey alone", `{"maxPerKey":2}`, "opts.maxPerKey"},
		{"maxPerKey with keyOrdered false", `{"keyOrdered":false,"maxPerKey":2}`, "opts.maxPerKey"},
		{"maxPerKey negative", `{"keyOrdered":true,"maxPerKey":-1}`, "opts.maxPerKey"},
		{"maxPerKey a string", `{"keyOrdered":true,"maxPerKey":"2"}`, "opts.maxPerKey"},
		{"maxPerKey a fraction", `{"keyOrdered":true,"maxPerKey":1.5}`, "opts.maxPerKey"},
		{"keyOrdered a string", `{"keyOrdered":"true"}`, "opts.keyOrdered"},
		{"keyOrdered a number", `{"keyOrdered":1}`, "opts.keyOrdered"},
	}
	for _, tt := range tests {
		r.send(`{"op":"SUBSCRIBE","topic":"t","group":"g","opts":` + tt.opts + `,"corr":"c"}`)
		f := r.expectErr(wsproto.CodeBadFrame, "c")
		assert.Contains(t, f.str("msg"), tt.field, tt.name)
	}
	// Key order is the group's setting, stored at its first SUBSCRIBE: a
	// SUBSCRIBE asking for nothing joins the key-ordered group, one
	// asking for another maxPerKey is refused naming it; a member's
	// maxInFlight caps what it holds of one key.
	r.subscribe("t", "g", "ok", map[string]any{"keyOrdered": true, "maxPerKey": 20})
	o := e.authed()
	o.subscribe("t", "g", "plain", nil)
	p := e.authed()
	p.send(`{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"keyOrdered":true,"maxPerKey":5},"corr":"other"}`)
	msg := p.expectErr(wsproto.CodeBadFrame, "other").str("msg")
	assert.Contains(t, msg, "maxPerKey: stored 20, asked 5")
	p.subscribe("t", "g", "same", map[string]any{"keyOrdered": true, "maxInFlight": 5, "maxPerKey": 20})
}

// TestKeyOrderedGoClient: the Go client's WithKeyOrdered and WithMaxPerKey
// reach the server: with four handler goroutines, a key's messages still
// come one at a time and in order, its first one failing twice.
func TestKeyOrderedGoClient(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	e := newEnv(t, func(c *Config) { c.Clock = clk })
	ctx := context.Background()
	c := e.client(nil)
	want := map[string][]string{}
	for _, k := range []string{"a", "b", "c"} {
		for i := 1; i <= 4; i++ {
			payload := fmt.Sprintf("%q", fmt.Sprintf("%s%d", k, i))
			_, err := c.Publish(ctx, "keyed", []byte(payload), event.WithKey(k))
			require.NoError(t, err)
			want[k] = append(want[k], payload)
		}
	}

	_, err := c.Subscribe(ctx, "keyed", "g2", func(context.Context, *wsclient.Message) error { return nil }, event.WithMaxPerKey(2))
	require.ErrorIs(t, err, event.ErrInvalid, "maxPerKey without keyOrdered is refused before the wire")
	// maxPerKey is the group's: above a member's maxInFlight it is capped
	// by it; a later subscription asking for another is refused by name.
	g3, err := c.Subscribe(ctx, "keyed", "g3", func(context.Context, *wsclient.Message) error { return nil },
		event.WithKeyOrdered(), event.WithMaxPerKey(500)) // above the server's maxInFlight (100)
	require.NoError(t, err)
	c2 := e.client(nil)
	_, err = c2.Subscribe(ctx, "keyed", "g3", func(context.Context, *wsclient.Message) error { return nil },
		event.WithKeyOrdered(), event.WithMaxPerKey(2))
	require.ErrorIs(t, err, wsproto.ErrBadFrame)
	assert.Contains(t, err.Error(), "maxPerKey: stored 500, asked 2")
	require.NoError(t, g3.Close())

	var (
		mu       sync.Mutex
		got      = map[string][]string{}
		running  = map[string]int{}
		fails    int
		overlaps int
		done     = make(chan struct{})
	)
	h := func(_ context.Context, m *wsclient.Message) error {
		mu.Lock()
		running[m.Key]++
		overlap := running[m.Key] > 1
		mu.Unlock()
		defer func() {
			mu.Lock()
			running[m.Key]--
			mu.Unlock()
		}()
		mu.Lock()
		defer mu.Unlock()
		if overlap {
			overlaps++
		}
		if string(m.Payload) == `"a1"` && m.Attempt < 3 {
			fails++
			return errors.New("not yet")
		}
		got[m.Key] = append(got[m.Key], string(m.Payload))
		if len(got["a"])+len(got["b"])+len(got["c"]) == 12 {
			close(done)
		}
		return nil
	}
	_, err = c.Subscribe(ctx, "keyed", "g", h, event.FromEarliest(), event.WithKeyOrdered(), event.WithMaxPerKey(2),
		event.WithMaxInFlight(4), event.WithConcurrency(4))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return true
		default:
			clk.Advance(10 * time.Millisecond) // the backoffs of a1
			return false
		}
	}, 10*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, got)
	assert.Equal(t, 2, fails)
	assert.Zero(t, overlaps, "two messages of one key in handlers at once")
}
