package ws

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of live subscriptions (SUBSCRIBE without group), over the wire,
// as a client written from docs/PROTOCOL.md sees them.

// liveGot is an EVENT or GAP frame of a live subscription.
type liveGot struct {
	op, reason string
	seq        uint64 // an EVENT's
	from, to   uint64 // a GAP's
	group, ctx bool   // the EVENT had a group, a ctx
}

func (g liveGot) String() string {
	if g.op == "GAP" {
		return fmt.Sprintf("GAP %d..%d %s", g.from, g.to, g.reason)
	}
	return fmt.Sprintf("EVENT %d", g.seq)
}

// last is the last seq the frame covers.
func (g liveGot) last() uint64 {
	if g.op == "GAP" {
		return g.to
	}
	return g.seq
}

// liveStream collects the EVENT and GAP frames of a connection in a
// goroutine of its own, so that the client keeps reading while the test
// publishes.
type liveStream struct {
	t      *testing.T
	mu     sync.Mutex
	got    []liveGot
	other  []frame // frames that are neither EVENT nor GAP
	closed error   // how the connection ended
	news   chan struct{}
}

// stream starts collecting r's frames; r must not be read otherwise from
// now on.
func (r *raw) stream() *liveStream {
	s := &liveStream{t: r.t, news: make(chan struct{}, 1)}
	go func() {
		for m := range r.rd {
			s.mu.Lock()
			if m.err != nil {
				s.closed = m.err
				s.mu.Unlock()
				wakeUp(s.news)
				return
			}
			var f struct {
				Op, Reason, Group string
				From, To          uint64
				Event             *struct{ Seq uint64 }
				Ctx               json.RawMessage
			}
			if err := json.Unmarshal(m.data, &f); err != nil {
				s.closed = err
			}
			switch f.Op {
			case "EVENT":
				s.got = append(s.got, liveGot{op: f.Op, seq: f.Event.Seq, group: f.Group != "", ctx: f.Ctx != nil})
			case "GAP":
				s.got = append(s.got, liveGot{op: f.Op, from: f.From, to: f.To, reason: f.Reason})
			default:
				var fr frame
				_ = json.Unmarshal(m.data, &fr)
				s.other = append(s.other, fr)
			}
			s.mu.Unlock()
			wakeUp(s.news)
		}
	}()
	return s
}

// waitFor waits until the frames cover seq, and returns them.
func (s *liveStream) waitFor(seq uint64) []liveGot {
	s.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		got, closed := append([]liveGot(nil), s.got...), s.closed
		s.mu.Unlock()
		if len(got) > 0 && got[len(got)-1].last() >= seq {
			return got
		}
		if closed != nil {
			s.t.Fatalf("connection ended (%v) with %d frames, the last %v; want seq %d", closed, len(got), lastOf(got), seq)
		}
		select {
		case <-s.news:
		case <-deadline:
			s.t.Fatalf("frames do not reach seq %d within 30s; got %d, the last %v", seq, len(got), lastOf(got))
		}
	}
}

func lastOf(got []liveGot) any {
	if len(got) == 0 {
		return nil
	}
	return got[len(got)-1]
}

// requireCovers checks that got covers the seqs from..to once each, in
// order, as EVENTs and GAPs, and returns the GAPs.
func requireCovers(t *testing.T, got []liveGot, from, to uint64) []liveGot {
	t.Helper()
	next := from
	var gaps []liveGot
	for i, g := range got {
		switch g.op {
		case "EVENT":
			require.Equal(t, next, g.seq, "frame %d of %v", i, got)
			require.False(t, g.group || g.ctx, "a live EVENT has no group and no ctx")
			next++
		case "GAP":
			require.Equal(t, next, g.from, "frame %d (%v) of %v", i, g, got)
			require.GreaterOrEqual(t, g.to, g.from, "frame %d", i)
			gaps = append(gaps, g)
			next = g.to + 1
		}
	}
	require.Equal(t, to+1, next, "the frames end at %d, want %d: %v", next-1, to, lastOf(got))
	return gaps
}

// events returns the seqs of the EVENTs in got.
func events(got []liveGot) []uint64 {
	var seqs []uint64
	for _, g := range got {
		if g.op == "EVENT" {
			seqs = append(seqs, g.seq)
		}
	}
	return seqs
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// liveSubscribe sends a SUBSCRIBE without group and returns its OK.
func (r *raw) liveSubscribe(topic, corr string, opts map[string]any) frame {
	r.t.Helper()
	f := map[string]any{"op": "SUBSCRIBE", "topic": topic, "corr": corr}
	if opts != nil {
		f["opts"] = opts
	}
	r.send(f)
	return r.expectOK(corr)
}

// publishN publishes n events of payload to topic through the bus.
func (e *testEnv) publishN(topic string, n int, payload string) {
	e.t.Helper()
	for range n {
		_, err := e.bus.Publish(context.Background(), topic, []byte(payload))
		require.NoError(e.t, err)
	}
}

// A live SUBSCRIBE is answered OK with the seq after which it delivers;
// EVENTs have no group and no ctx; UNSUBSCRIBE without group ends it; a
// second one on the topic is already_subscribed.
func TestLiveSubscribe(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	e := newEnv(t, func(c *Config) { c.Observer = obs })
	e.publishN("orders", 3, `{"n":0}`)

	r := e.authed()
	ok := r.liveSubscribe("orders", "s", nil)
	assert.Equal(t, float64(3), ok.num("seq"), "the head: events after it are delivered")
	assert.NotContains(t, ok, "recovered", "recovered only with since")
	r.send(`{"op":"SUBSCRIBE","topic":"orders","corr":"dup"}`)
	r.expectErr(wsproto.CodeAlreadySubscribed, "dup")

	p := e.authed()
	pub := p.publish("orders", map[string]any{"total": 42}, "p")
	ev := r.expectEvent()
	assert.Equal(t, "orders", ev.str("topic"))
	assert.NotContains(t, ev, "group")
	assert.NotContains(t, ev, "ctx")
	assert.Equal(t, pub.str("id"), ev.obj("event").str("id"))
	assert.Equal(t, float64(4), ev.obj("event").num("seq"))
	assert.Equal(t, map[string]any{"total": float64(42)}, ev.obj("event")["payload"])

	// The ops of groups name group.
	r.send(`{"op":"ACK","topic":"orders","id":"` + pub.str("id") + `","corr":"a"}`)
	assert.Contains(t, r.expectErr(wsproto.CodeBadFrame, "a").str("msg"), "group")
	r.send(`{"op":"PAUSE","topic":"orders","corr":"pa"}`)
	assert.Contains(t, r.expectErr(wsproto.CodeBadFrame, "pa").str("msg"), "group")

	assert.Equal(t, 1, e.gw.Stats().Subscriptions)
	assert.Equal(t, LiveStats{Subscriptions: 1, Topics: 1}, e.gw.LiveStats())

	r.send(`{"op":"UNSUBSCRIBE","topic":"orders","corr":"u"}`)
	r.expectOK("u")
	r.send(`{"op":"UNSUBSCRIBE","topic":"orders","corr":"u2"}`)
	r.expectErr(wsproto.CodeNotSubscribed, "u2")
	p.publish("orders", 1, "p2")
	r.noFrameFor(100 * time.Millisecond)
	// The topic's reader stops with its last subscriber.
	require.Eventually(t, func() bool { return e.gw.LiveStats().Topics == 0 }, 10*time.Second, 5*time.Millisecond)
	subs, _, _ := obs.live("orders")
	assert.Equal(t, 0, subs)

	// A group subscription of the same topic is another subscription.
	r.subscribe("orders", "g", "sg", nil)
	r.liveSubscribe("orders", "s2", nil)
	assert.Equal(t, 2, e.gw.Stats().Subscriptions)
}

// Fan-out: every one of 200 connections gets every event once, in order;
// the topic is read once per batch, not once per connection.
func TestLiveFanOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const conns, n = 200, 100
	streams := make([]*liveStream, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.authed()
			r.liveSubscribe("fan", "s", nil)
			streams[i] = r.stream()
		}()
	}
	wg.Wait()
	readsBefore := e.store.reads.Load()
	e.publishN("fan", n, `{"x":"y"}`)
	for i, s := range streams {
		got := s.waitFor(n)
		require.Equal(t, seqRange(1, n), events(got), "connection %d", i)
		requireCovers(t, got, 1, n)
	}
	// At most a read per publish (and a poll or two), whatever the number
	// of connections.
	assert.LessOrEqual(t, e.store.reads.Load()-readsBefore, int64(2*n+10))
}

// Recovery: clients subscribe with since while publishers race, drop their
// connection, and subscribe again with since = the last seq they saw;
// each gets every seq once, in order, with no GAP.
func TestLiveRecoveryRacingPublishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const initial, publishers, each, clients = 50, 4, 200, 20
	const total = initial + publishers*each
	e.publishN("race", initial, `1`)

	var pubs sync.WaitGroup
	for range publishers {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			for range each {
				_, err := e.bus.Publish(context.Background(), "race", []byte(`2`))
				assert.NoError(t, err)
			}
		}()
	}
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := uint64(rand.IntN(initial + 1))
			since := first
			var all []liveGot
			for round := 0; since < total; round++ {
				r := e.authed()
				ok := r.liveSubscribe("race", "s", map[string]any{"since": since})
				require.Equal(t, true, ok["recovered"], "client %d round %d", i, round)
				require.Equal(t, float64(since), ok.num("seq"))
				s := r.stream()
				// Up to a few rounds with a dropped connection each, then to the end.
				until := uint64(total)
				if round < 3 {
					until = min(total, since+1+uint64(rand.IntN(300)))
				}
				got := s.waitFor(until)
				_ = r.c.CloseNow()
				all = append(all, got...)
				since = got[len(got)-1].last()
			}
			require.Equal(t, seqRange(first+1, total), events(all), "client %d", i)
			require.Empty(t, requireCovers(t, all, first+1, total), "client %d", i)
		}()
	}
	wg.Wait()
	pubs.Wait()
}

// Retention deleted the first events: a SUBSCRIBE with since before them
// is answered recovered false with the seq before the first one kept, and
// a GAP "deleted" names what was missed.
func TestLiveRecoveredFalseAfterRetention(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	e := newEnv(t, func(c *Config) { c.Observer = obs })
	for i := range 10 {
		_, err := e.bus.Publish(context.Background(), "ret", []byte(`1`), event.WithTS(int64(1000+i)))
		require.NoError(t, err)
	}
	n, err := e.store.Prune(context.Background(), "ret", 1005, false) // seqs 1..5
	require.NoError(t, err)
	require.Equal(t, 5, n)

	r := e.authed()
	ok := r.liveSubscribe("ret", "s", map[string]any{"since": 2})
	assert.Equal(t, false, ok["recovered"])
	assert.Equal(t, float64(5), ok.num("seq"), "delivery starts after 5")
	s := r.stream()
	e.publishN("ret", 2, `2`)
	got := s.waitFor(12)
	gaps := requireCovers(t, got, 3, 12)
	assert.Equal(t, []liveGot{{op: "GAP", from: 3, to: 5, reason: "deleted"}}, gaps)
	assert.Equal(t, seqRange(6, 12), events(got))
	require.Eventually(t, func() bool { _, _, rec := obs.live("ret"); return rec == 5 }, 10*time.Second, 5*time.Millisecond, "seqs 6..10 read for since")

	// Since 0 and since at the head are recovered when nothing is missing.
	r2 := e.authed()
	ok = r2.liveSubscribe("ret", "s", map[string]any{"since": 12})
	assert.Equal(t, true, ok["recovered"])
	assert.Equal(t, float64(12), ok.num("seq"))
	ok = r2.liveSubscribe("other", "s2", map[string]any{"since": 0})
	assert.Equal(t, true, ok["recovered"])
	assert.Equal(t, float64(0), ok.num("seq"))

	// A since beyond the topic's head (a position of another store)
	// starts at the head, recovered false.
	ok = e.authed().liveSubscribe("ret", "s", map[string]any{"since": 500})
	assert.Equal(t, false, ok["recovered"])
	assert.Equal(t, float64(12), ok.num("seq"))
}

// Compaction deleted records in the middle of the topic: recovery and the
// live reader send a GAP "deleted" for each hole, before the next EVENT.
func TestLiveGapOnCompaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "b", "c"} { // seq 2 is superseded by 3
		_, err := e.bus.Publish(ctx, "cmp", []byte(`1`), event.WithKey(k), event.WithTS(1))
		require.NoError(t, err)
	}
	_, err := e.store.Prune(ctx, "cmp", 100, true)
	require.NoError(t, err)

	r := e.authed()
	ok := r.liveSubscribe("cmp", "s", map[string]any{"since": 0})
	assert.Equal(t, true, ok["recovered"], "seq 1 is kept")
	s := r.stream()
	got := s.waitFor(4)
	assert.Equal(t, []liveGot{{op: "GAP", from: 2, to: 2, reason: "deleted"}}, requireCovers(t, got, 1, 4))

	// The live reader: it reads after compaction deleted what it had not
	// read yet.
	gate := make(chan struct{})
	e.store.readGate.Store(&gate)
	for _, k := range []string{"d", "e", "e", "e", "f"} { // 5..9: 6 and 7 are superseded
		_, err := e.bus.Publish(ctx, "cmp", []byte(`1`), event.WithKey(k), event.WithTS(1))
		require.NoError(t, err)
	}
	_, err = e.store.Prune(ctx, "cmp", 100, true)
	require.NoError(t, err)
	e.store.readGate.Store(nil)
	close(gate)
	got = s.waitFor(9)
	gaps := requireCovers(t, got, 1, 9)
	assert.Equal(t, []liveGot{{op: "GAP", from: 2, to: 2, reason: "deleted"}, {op: "GAP", from: 6, to: 7, reason: "deleted"}}, gaps)
	assert.Equal(t, []uint64{1, 3, 4, 5, 8, 9}, events(got))
}

// A live subscriber that stops reading is closed with 4429 once its queue
// is full, while another subscriber of the topic gets every event and
// every publish is stored: the slow one holds up neither.
func TestLiveSlowSubscriberClosed(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	e := newSmallEnv(t, 8<<10, func(c *Config) {
		c.Observer = obs
		c.LiveQueueEvents, c.LiveQueueBytes = 64, 256<<10
	})
	conn, br := e.stalledClientWith(`{"op":"SUBSCRIBE","topic":"slow","corr":"s"}`)
	fast := e.authed()
	fast.liveSubscribe("slow", "s", nil)
	fs := fast.stream()

	payload := `"` + strings.Repeat("x", 4<<10) + `"`
	const rounds, per = 30, 10
	published := 0
	for round := 1; round <= rounds; round++ {
		for range per {
			_, err := e.bus.Publish(context.Background(), "slow", []byte(payload))
			require.NoError(t, err)
			published++
		}
		fs.waitFor(uint64(round * per)) // the fast one keeps up; the stalled one does not read
	}
	assert.Equal(t, rounds*per, published, "no publish waited for the slow subscriber")
	got := fs.waitFor(rounds * per)
	assert.Equal(t, seqRange(1, rounds*per), events(got))
	require.Empty(t, requireCovers(t, got, 1, rounds*per))

	_, dropped, _ := obs.live("slow")
	assert.Equal(t, map[string]int{"close": 1}, dropped)
	// The stalled client reads again: what was written before, then the
	// close frame with 4429, which it answers.
	for {
		op, p := readServerFrameOp(t, br)
		if op == 8 {
			require.GreaterOrEqual(t, len(p), 2)
			assert.Equal(t, wsproto.CloseSlowSubscriber, int(p[0])<<8|int(p[1]))
			assert.Contains(t, string(p[2:]), "too slow")
			_, _ = conn.Write([]byte{0x88, 0x80 | 2, 0, 0, 0, 0, p[0], p[1]})
			break
		}
	}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int{wsproto.CloseSlowSubscriber}, obs.closed()) },
		10*time.Second, 10*time.Millisecond, "closes: %v", obs.closed())
}

// With slow "skip", a subscriber that falls behind loses its queued
// events for a GAP "slow" that names them, and goes on with the newest.
func TestLiveSlowSubscriberSkips(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	e := newSmallEnv(t, 8<<10, func(c *Config) {
		c.Observer = obs
		c.LiveQueueEvents, c.LiveQueueBytes = 64, 256<<10
	})
	conn, br := e.stalledClientWith(`{"op":"SUBSCRIBE","topic":"skip","opts":{"slow":"skip"},"corr":"s"}`)
	payload := `"` + strings.Repeat("x", 4<<10) + `"`
	const n = 300
	e.publishN("skip", n, payload)
	require.Eventually(t, func() bool { _, d, _ := obs.live("skip"); return d["skip"] > 0 }, 30*time.Second, 5*time.Millisecond)

	// It reads again: every seq up to n once, as an EVENT or in a GAP.
	var got []liveGot
	read := func(until uint64) {
		for len(got) == 0 || got[len(got)-1].last() < until {
			op, p := readServerFrameOp(t, br)
			require.Equal(t, byte(1), op, "a text frame: %q", p)
			var f struct {
				Op, Reason string
				From, To   uint64
				Event      struct{ Seq uint64 }
			}
			require.NoError(t, json.Unmarshal(p, &f))
			if f.Op == "GAP" {
				got = append(got, liveGot{op: f.Op, from: f.From, to: f.To, reason: f.Reason})
			} else {
				got = append(got, liveGot{op: f.Op, seq: f.Event.Seq})
			}
		}
	}
	read(n)
	gaps := requireCovers(t, got, 1, n)
	require.NotEmpty(t, gaps)
	for _, g := range gaps {
		assert.Equal(t, "slow", g.reason)
	}
	// And it goes on.
	e.publishN("skip", 5, `1`)
	read(n + 5)
	requireCovers(t, got, 1, n+5)
	assert.Equal(t, seqRange(n+1, n+5), events(got)[len(events(got))-5:])
	assert.Empty(t, obs.closed(), "nothing closed")
	_ = conn
}

// A live subscription needs the subscribe permission on the topic for no
// group: a rule that names groups does not grant it.
func TestLiveACL(t *testing.T) {
	t.Parallel()
	policy, err := acl.NewPolicy(
		acl.Rule{Effect: acl.Allow, Action: acl.Subscribe, Topics: []string{"orders"}, Groups: []string{"billing"}},
		acl.Rule{Effect: acl.Allow, Action: acl.Subscribe, Topics: []string{"public.*"}},
	)
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) {
		c.Verifier = auth.VerifierFunc(func(context.Context, string) (*auth.Principal, error) {
			return &auth.Principal{Subject: "u", Policy: policy}, nil
		})
	})
	r := e.authed()
	r.subscribe("orders", "billing", "g", nil)
	r.send(`{"op":"SUBSCRIBE","topic":"orders","corr":"l"}`)
	assert.Contains(t, r.expectErr(wsproto.CodeForbidden, "l").str("msg"), "orders")
	r.liveSubscribe("public.news", "ok", nil)
	assert.Equal(t, 1, e.gw.LiveStats().Subscriptions)
}

// Live subscriptions count against MaxSubscriptions, and
// MaxLiveSubscribers bounds those of a topic.
func TestLiveLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.MaxSubscriptions, c.MaxLiveSubscribers = 2, 2 })
	r := e.authed()
	r.subscribe("t", "g", "g", nil)
	r.liveSubscribe("a", "a", nil)
	r.send(`{"op":"SUBSCRIBE","topic":"b","corr":"b"}`)
	assert.Contains(t, r.expectErr(wsproto.CodeRateLimited, "b").str("msg"), "2 subscriptions")
	r.send(`{"op":"SUBSCRIBE","topic":"t","group":"g2","corr":"g2"}`)
	r.expectErr(wsproto.CodeRateLimited, "g2")

	r2 := e.authed()
	r2.liveSubscribe("a", "a", nil)
	r3 := e.authed()
	r3.send(`{"op":"SUBSCRIBE","topic":"a","corr":"a"}`)
	assert.Contains(t, r3.expectErr(wsproto.CodeRateLimited, "a").str("msg"), `topic "a" has 2 live subscribers`)
	r2.send(`{"op":"UNSUBSCRIBE","topic":"a","corr":"u"}`)
	r2.expectOK("u")
	r3.liveSubscribe("a", "a2", nil)
}

// The operator's listing shows live subscriptions, of kind live.
func TestLiveConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	r.subscribe("orders", "billing", "g", nil)
	r.liveSubscribe("orders", "l", nil)
	r.liveSubscribe("audit", "l2", nil)
	var cs []ConnInfo
	require.Eventually(t, func() bool { cs = e.gw.Connections(); return len(cs) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"audit", "orders", "orders/billing"}, cs[0].Subscriptions)
	assert.Equal(t, []SubInfo{{Kind: KindLive, Topic: "audit"}, {Kind: KindLive, Topic: "orders"}, {Kind: KindGroup, Topic: "orders", Group: "billing"}}, cs[0].Subs)
}

// A re-AUTH whose policy no longer allows a live subscription ends it
// with an ERR forbidden naming its topic (and no group).
func TestLiveEndedByReAuth(t *testing.T) {
	t.Parallel()
	all := acl.AllowEverything()
	pubOnly, err := acl.NewPolicy(acl.Rule{Effect: acl.Allow, Action: acl.Publish, Topics: []string{"**"}})
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) {
		c.Verifier = auth.VerifierFunc(func(_ context.Context, tok string) (*auth.Principal, error) {
			if tok == "narrow" {
				return &auth.Principal{Subject: "u", Policy: pubOnly}, nil
			}
			return &auth.Principal{Subject: "u", Policy: all}, nil
		})
	})
	r := e.authed()
	r.liveSubscribe("news", "l", nil)
	r.send(`{"op":"AUTH","token":"narrow","corr":"a2"}`)
	r.expectOK("a2")
	f := r.recv()
	assert.Equal(t, "ERR", f.str("op"))
	assert.Equal(t, "forbidden", f.str("code"))
	assert.Equal(t, "news", f.str("topic"))
	assert.NotContains(t, f, "group")
	assert.Equal(t, 0, e.gw.LiveStats().Subscriptions)
}

// A live subscriber over a raw coder/websocket connection that closes
// mid-stream leaves nothing behind: the topic's reader stops.
func TestLiveReaderStopsWithLastSubscriber(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var rs []*raw
	for range 3 {
		r := e.authed()
		r.liveSubscribe("stop", "l", nil)
		rs = append(rs, r)
	}
	e.publishN("stop", 10, `1`)
	require.Equal(t, 1, e.gw.LiveStats().Topics)
	for _, r := range rs {
		_ = r.c.Close(websocket.StatusNormalClosure, "")
	}
	require.Eventually(t, func() bool { return e.gw.LiveStats() == LiveStats{} }, 10*time.Second, 5*time.Millisecond)
	// A new subscriber starts another reader at the head.
	r := e.authed()
	assert.Equal(t, float64(10), r.liveSubscribe("stop", "l", nil).num("seq"))
}
