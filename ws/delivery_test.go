package ws

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestThousandExactlyOnce: 1,000 published, all received and acked, each
// exactly once.
func TestThousandExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sub := e.authed()
	sub.subscribe("load", "g", "s", map[string]any{"maxInFlight": 50})
	pub := e.authed()

	const n = 1000
	go func() {
		// Publish without waiting for each OK; the OKs are counted below.
		for i := 0; i < n; i++ {
			if err := pub.c.Write(context.Background(), websocket.MessageText,
				[]byte(fmt.Sprintf(`{"op":"PUBLISH","topic":"load","payload":%d,"corr":"p%d"}`, i, i))); err != nil {
				return
			}
		}
	}()
	seen := make(map[string]int, n)
	payloads := make(map[float64]bool, n)
	oks := 0
	for len(seen) < n || oks < n {
		f := sub.recvWithin(10 * time.Second)
		switch f.str("op") {
		case "EVENT":
			ev := f.obj("event")
			id := ev.str("id")
			seen[id]++
			payloads[ev.num("payload")] = true
			require.Equal(t, float64(1), f.obj("ctx").num("attempt"))
			sub.send(ack("ACK", "load", "g", id, "a"+id))
		case "OK":
			oks++
		default:
			t.Fatalf("unexpected frame %v", f)
		}
	}
	for i := 0; i < n; i++ {
		require.Equal(t, "OK", pub.recv().str("op"))
	}
	assert.Len(t, payloads, n)
	for id, c := range seen {
		assert.Equal(t, 1, c, "id %s delivered %d times", id, c)
	}
	require.Eventually(t, func() bool {
		c, err := e.bus.Cursor(context.Background(), "load", "g")
		return err == nil && c.Seq == n
	}, 5*time.Second, 10*time.Millisecond, "every event settled and committed")
	sub.noFrameFor(50 * time.Millisecond)
}

// TestNoAckRedelivers: an event not acked by its deadline comes again with
// attempt 2.
func TestNoAckRedelivers(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	e := newEnv(t, func(c *Config) { c.Clock = clk }) // the bus's clock too
	r := e.authed()
	r.subscribe("t", "g", "s", map[string]any{"ackTimeoutMs": 300})
	id := e.authed().publish("t", "x", "p").str("id")
	f := r.expectEvent()
	require.Equal(t, float64(1), f.obj("ctx").num("attempt"))
	sent := clk.Now()
	f = recvAdvancing(r, clk, 10*time.Millisecond)
	require.Equal(t, "EVENT", f.str("op"), "want EVENT, got %v", f)
	assert.Equal(t, id, f.obj("event").str("id"))
	assert.Equal(t, float64(2), f.obj("ctx").num("attempt"))
	assert.GreaterOrEqual(t, clk.Now().Sub(sent), 250*time.Millisecond, "not before the deadline")
}

// recvAdvancing returns r's next frame, moving clk on by step while none
// has come.
func recvAdvancing(r *raw, clk *clock.Fake, step time.Duration) frame {
	r.t.Helper()
	for range 10_000 {
		select {
		case m := <-r.rd:
			require.NoError(r.t, m.err, "connection ended")
			var f frame
			require.NoError(r.t, json.Unmarshal(m.data, &f), "server sent bad JSON: %s", m.data)
			return f
		case <-time.After(time.Millisecond):
			clk.Advance(step)
		}
	}
	r.t.Fatalf("no frame within %v of the fake clock", 10_000*step)
	return nil
}

// TestModAckPostpones: MODACK extends the lease past the first deadline,
// and the extended delivery can still be acked.
func TestModAckPostpones(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	e := newEnv(t, func(c *Config) { c.Clock = clk }) // the bus's clock too
	r := e.authed()
	r.subscribe("t", "g", "s", map[string]any{"ackTimeoutMs": 300})
	id := e.authed().publish("t", "x", "p").str("id")
	r.expectEvent()
	r.send(`{"op":"MODACK","topic":"t","group":"g","id":"` + id + `","extend_ms":3000,"corr":"m"}`)
	r.expectOK("m")
	clk.Advance(700 * time.Millisecond)
	r.noFrameFor(100 * time.Millisecond) // the first deadline passes unnoticed
	r.send(ack("ACK", "t", "g", id, "a"))
	r.expectOK("a")
	require.Eventually(t, func() bool {
		clk.Advance(10 * time.Millisecond) // commits come due
		c, err := e.bus.Cursor(context.Background(), "t", "g")
		return err == nil && c.Seq == 1
	}, 5*time.Second, 10*time.Millisecond)
}

// TestDisconnectGivesBack: a client that disconnects with events in flight
// makes them go to another client of the group at once, long before their
// deadline.
func TestDisconnectGivesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	a := e.authed()
	a.subscribe("t", "g", "s", map[string]any{"ackTimeoutMs": 60_000})
	p := e.authed()
	ids := map[string]bool{}
	for i := 0; i < 10; i++ {
		ids[p.publish("t", i, fmt.Sprint("p", i)).str("id")] = true
	}
	for i := 0; i < 10; i++ {
		a.expectEvent()
	}
	b := e.authed()
	b.subscribe("t", "g", "s", nil)
	start := time.Now()
	require.NoError(t, a.c.Close(websocket.StatusNormalClosure, "bye"))
	for i := 0; i < 10; i++ {
		f := b.expectEvent()
		id := f.obj("event").str("id")
		assert.True(t, ids[id])
		delete(ids, id)
		assert.Equal(t, float64(2), f.obj("ctx").num("attempt"))
	}
	assert.Less(t, time.Since(start), 10*time.Second, "well before the 60s deadline")
	assert.Empty(t, ids)
}

// TestUnsubscribeGivesBack: the same through UNSUBSCRIBE.
func TestUnsubscribeGivesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	a := e.authed()
	a.subscribe("t", "g", "s", map[string]any{"ackTimeoutMs": 60_000})
	id := e.authed().publish("t", 1, "p").str("id")
	a.expectEvent()
	b := e.authed()
	b.subscribe("t", "g", "s", nil)
	a.send(`{"op":"UNSUBSCRIBE","topic":"t","group":"g","corr":"u"}`)
	a.expectOK("u")
	f := b.expectEvent()
	assert.Equal(t, id, f.obj("event").str("id"))
}

// TestSlowReaderBounded: a client that stops reading makes delivery wait:
// once the socket buffers are full, the gateway's send queue stays at its
// bound and the bus stops at max in-flight, while most events wait in the
// store; and nothing is dropped: once the client reads again, every event
// arrives.
func TestSlowReaderBounded(t *testing.T) {
	t.Parallel()
	const (
		queue       = 8
		maxInFlight = 1000
		n           = 1500
	)
	e := newEnv(t, func(c *Config) { c.SendQueue = queue; c.MaxInFlight = maxInFlight })

	// A client that does not read at all, not even at the socket level.
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, e.url, nil)
	require.NoError(t, err)
	c.SetReadLimit(-1)
	t.Cleanup(func() { _ = c.CloseNow() })
	write := func(s string) { require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(s))) }
	write(`{"op":"AUTH","token":"` + testToken + `"}`)
	// From earliest: the publishes below may beat the SUBSCRIBE.
	write(`{"op":"SUBSCRIBE","topic":"big","group":"g","opts":{"from":"earliest"}}`)

	// 1,000 in flight x 16 KiB is far more than loopback socket buffers hold.
	payload := []byte(`"` + strings.Repeat("x", 16<<10) + `"`)
	for i := 0; i < n; i++ {
		_, err := e.bus.Publish(ctx, "big", payload)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return e.gw.Stats().Queued == queue },
		10*time.Second, 10*time.Millisecond, "the send queue fills up to its bound")
	check := func() {
		st := e.gw.Stats()
		require.LessOrEqual(t, st.MaxQueued, queue)
		require.LessOrEqual(t, st.Leases, maxInFlight)
		for _, g := range e.bus.Stats() {
			if g.Topic == "big" {
				require.LessOrEqual(t, g.InFlight, maxInFlight)
				require.Less(t, g.Buffered, 2*event.DefaultReadBatch, "the bus reads at most about a batch ahead")
			}
		}
	}
	for i := 0; i < 20; i++ { // and it stays there
		check()
		time.Sleep(5 * time.Millisecond)
	}

	// Read again (and ack, from another goroutine, as any client that
	// reads and writes independently): all n arrive, none dropped.
	ids := make(chan string, n)
	readErr := make(chan error, 1)
	go func() {
		defer close(ids)
		for count := 0; count < n; {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, data, err := c.Read(rctx)
			cancel()
			if err != nil {
				readErr <- err
				return
			}
			s := string(data)
			if !strings.HasPrefix(s, `{"op":"EVENT"`) {
				continue
			}
			i := strings.Index(s, `"id":"`) + len(`"id":"`)
			ids <- s[i : i+strings.IndexByte(s[i:], '"')]
			count++
		}
	}()
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
		write(`{"op":"ACK","topic":"big","group":"g","id":"` + id + `"}`)
	}
	select {
	case err := <-readErr:
		require.NoError(t, err)
	default:
	}
	assert.Len(t, seen, n)
}
