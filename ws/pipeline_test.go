package ws

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPipelinedPublish: a client writes many PUBLISH frames without
// waiting for answers. The gateway reads on while the store is busy,
// stores the waiting frames in one batch, and answers in the order of the
// frames, those without corr included; a frame refused before the store
// (too large) and one the store refuses (poison) get their ERR in their
// place, and the others are stored in frame order.
func TestPipelinedPublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.MaxPayload = 100 })
	r := e.authed()
	r.publish("t", 0, "warm") // seq 1

	gate := make(chan struct{})
	e.store.gate.Store(&gate)
	before := e.store.appends.Load()
	const n = 60
	big := `"` + strings.Repeat("x", 200) + `"`
	var frames []string
	for i := range n {
		payload := fmt.Sprint(i)
		switch i {
		case 20:
			payload = big
		case 40:
			payload = `"poison"`
		}
		corr := ""
		if i%2 == 0 {
			corr = fmt.Sprintf(`,"corr":"p%d"`, i)
		}
		frames = append(frames, fmt.Sprintf(`{"op":"PUBLISH","topic":"t","payload":%s%s}`, payload, corr))
	}
	for _, f := range frames {
		r.send(f)
	}
	// All but the too large one wait for the store, in one connection.
	require.Eventually(t, func() bool { return e.gw.Stats().Publishing == n-1 }, 5*time.Second, time.Millisecond)
	e.store.gate.Store(nil)
	close(gate)

	seq := float64(1)
	for i := range n {
		corr := ""
		if i%2 == 0 {
			corr = fmt.Sprintf("p%d", i)
		}
		switch i {
		case 20:
			r.expectErr(wsproto.CodeTooLarge, corr)
		case 40:
			f := r.expectErr(wsproto.CodePublishFailed, corr)
			assert.Contains(t, f.str("msg"), "poison")
		default:
			f := r.recv()
			require.Equal(t, "OK", f.str("op"), "frame %d: %v", i, f)
			assert.Equal(t, corr, f.str("corr"), "frame %d", i)
			seq++
			assert.Equal(t, seq, f.num("seq"), "frame %d", i)
		}
	}
	// The append the gate held took what had been read by then, and the
	// next one the rest: one of them took half of the frames or more (the
	// batch with the poison was then tried again one record at a time).
	assert.GreaterOrEqual(t, e.store.largest.Load(), int64((n-1)/2), "appends: %d", e.store.appends.Load()-before)

	recs, err := e.store.Read(context.Background(), "t", 1, 100)
	require.NoError(t, err)
	require.Len(t, recs, n-2)
	want := 0
	for _, rec := range recs {
		if want == 20 || want == 40 {
			want++
		}
		assert.Equal(t, fmt.Sprint(want), string(rec.Payload), "seq %d", rec.Seq)
		want++
	}
	assert.Equal(t, 0, e.gw.Stats().Publishing)
}

// TestPipelinedPublishThenOtherFrames: a frame other than PUBLISH takes
// effect after the publishes before it are stored, and is answered after
// them: a group that SUBSCRIBEs from latest right behind pipelined
// publishes does not get them, and one that starts at seq 2 gets all.
func TestPipelinedPublishThenOtherFrames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	gate := make(chan struct{})
	e.store.gate.Store(&gate)
	for i := range 5 {
		r.send(fmt.Sprintf(`{"op":"PUBLISH","topic":"t","payload":%d,"corr":"p%d"}`, i, i))
	}
	r.send(`{"op":"SUBSCRIBE","topic":"t","group":"late","corr":"s1"}`)
	r.send(`{"op":"SUBSCRIBE","topic":"t","group":"all","corr":"s2","opts":{"from":"seq","seq":2}}`)
	r.noFrameFor(20 * time.Millisecond)
	e.store.gate.Store(nil)
	close(gate)
	for i := range 5 {
		r.expectOK(fmt.Sprintf("p%d", i))
	}
	r.expectOK("s1")
	r.expectOK("s2")
	for want := 2; want <= 5; want++ {
		f := r.expectEvent()
		assert.Equal(t, "all", f.str("group"))
		assert.Equal(t, float64(want), f.obj("event").num("seq"))
	}
	r.noFrameFor(50 * time.Millisecond)
}

// TestIdleConnectionsHoldOnlyTheirReader: an authenticated connection
// with a subscription, once idle, holds one goroutine of the gateway (its
// reader): no writer, pinger, answerer or subscription handler waits
// while there is nothing to do. (The test's own client holds one more per
// connection; the group and the gateway's keeper a few in all.)
func TestIdleConnectionsHoldOnlyTheirReader(t *testing.T) {
	e := newEnv(t, nil)
	base := runtime.NumGoroutine()
	const n = 20
	for i := range n {
		r := e.authed()
		r.subscribe("idle", "g", fmt.Sprint("s", i), nil)
		r.publish("other", i, fmt.Sprint("p", i))
	}
	limit := base + 2*n + 8
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= limit }, 5*time.Second, 5*time.Millisecond,
		"%d goroutines for %d idle connections, want at most %d", runtime.NumGoroutine(), n, limit)
}
