package ws

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recObserver records what the gateway reports.
type recObserver struct {
	mu      sync.Mutex
	conns   int
	closes  []int
	handled map[string]int
	sent    int

	liveSubs      map[string]int // live subscribers by topic
	liveDropped   map[string]int // by policy
	liveRecovered int            // records read for since
}

func (o *recObserver) Connected() { o.mu.Lock(); o.conns++; o.mu.Unlock() }
func (o *recObserver) Disconnected(code int, _ time.Duration) {
	o.mu.Lock()
	o.closes = append(o.closes, code)
	o.mu.Unlock()
}
func (o *recObserver) Handled(op string, code wsproto.Code, _ time.Duration) {
	o.mu.Lock()
	if o.handled == nil {
		o.handled = map[string]int{}
	}
	o.handled[op+"/"+string(code)]++
	o.mu.Unlock()
}
func (o *recObserver) Sent(string, string) { o.mu.Lock(); o.sent++; o.mu.Unlock() }
func (o *recObserver) LiveSubscribers(topic string, delta int) {
	o.mu.Lock()
	if o.liveSubs == nil {
		o.liveSubs = map[string]int{}
	}
	o.liveSubs[topic] += delta
	o.mu.Unlock()
}
func (o *recObserver) LiveDropped(_, policy string) {
	o.mu.Lock()
	if o.liveDropped == nil {
		o.liveDropped = map[string]int{}
	}
	o.liveDropped[policy]++
	o.mu.Unlock()
}
func (o *recObserver) LiveRecovered(_ string, n int) {
	o.mu.Lock()
	o.liveRecovered += n
	o.mu.Unlock()
}

// live returns the live subscribers of topic, the slow subscribers
// dropped by policy and the records read for since.
func (o *recObserver) live(topic string) (subs int, dropped map[string]int, recovered int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dropped = map[string]int{}
	for k, v := range o.liveDropped {
		dropped[k] = v
	}
	return o.liveSubs[topic], dropped, o.liveRecovered
}

func (o *recObserver) closed() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.closes...)
}

// TestPingTimeout: a client that stops answering pings (here: it never
// reads, so its pongs are never sent) is closed with wsproto.ClosePingTimeout.
func TestPingTimeout(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	e := newEnv(t, func(c *Config) {
		c.PingInterval, c.PingTimeout, c.Observer = 100*time.Millisecond, 200*time.Millisecond, obs
	})
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, e.url, nil)
	require.NoError(t, err)
	defer c.CloseNow()
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"op":"AUTH","token":"`+testToken+`"}`)))
	require.Eventually(t, func() bool { return len(obs.closed()) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []int{wsproto.ClosePingTimeout}, obs.closed())

	// A client that reads answers the pings and stays.
	r := e.authed()
	assert.Never(t, func() bool { return len(obs.closed()) > 1 }, 500*time.Millisecond, 20*time.Millisecond, "several ping rounds pass")
	r.publish("t", 1, "p")
}

func TestObserver(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	e := newEnv(t, func(c *Config) { c.Observer = obs })
	r := e.authed()
	r.subscribe("t", "g", "s", nil)
	// The EVENT may come before or after the PUBLISH's OK: the protocol
	// orders answers, not deliveries among them.
	r.send(`{"op":"PUBLISH","topic":"t","payload":1,"corr":"p"}`)
	ops := map[string]string{}
	for range 2 {
		f := r.recv()
		ops[f.str("op")] = f.str("corr")
	}
	require.Equal(t, map[string]string{"OK": "p", "EVENT": ""}, ops)
	r.send(`{"op":"NOPE"}`)
	r.expectErr(wsproto.CodeBadFrame, "")
	require.NoError(t, r.c.Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool { return len(obs.closed()) == 1 }, 5*time.Second, 10*time.Millisecond)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Equal(t, 1, obs.conns)
	assert.Equal(t, []int{int(websocket.StatusNormalClosure)}, obs.closes)
	assert.Equal(t, 1, obs.sent)
	assert.Equal(t, map[string]int{"AUTH/": 1, "SUBSCRIBE/": 1, "PUBLISH/": 1, "NOPE/bad_frame": 1}, obs.handled)
}
