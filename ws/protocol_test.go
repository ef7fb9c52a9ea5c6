package ws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
)

// These tests speak the protocol through a raw WebSocket, frame by frame,
// against a real server on loopback.

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.dial()

	r.send(`{"op":"PUBLISH","topic":"t","payload":1,"corr":"p0"}`)
	r.expectErr(wsproto.CodeUnauthorized, "p0")
	r.send(`{"op":"AUTH","token":"wrong","corr":"a1"}`)
	r.expectErr(wsproto.CodeAuthFailed, "a1")
	r.send(`{"op":"AUTH","corr":"a2"}`) // no token at all
	r.expectErr(wsproto.CodeAuthFailed, "a2")
	r.send(`{"op":"AUTH","token":"` + testToken + `","corr":"a3"}`)
	r.expectOK("a3")
	r.publish("t", 1, "p1")
	// Re-AUTH on an authenticated connection refreshes the token.
	r.send(`{"op":"AUTH","token":"` + testToken + `","corr":"a4"}`)
	r.expectOK("a4")
	// A refused re-AUTH leaves the connection authenticated as before.
	r.send(`{"op":"AUTH","token":"wrong","corr":"a5"}`)
	r.expectErr(wsproto.CodeAuthFailed, "a5")
	r.publish("t", 2, "p2")
}

// TestAnswersWithoutCorr: frames without corr are answered too, in order,
// as the seed clients expect.
func TestAnswersWithoutCorr(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.dial()
	r.send(`{"op":"AUTH","token":"` + testToken + `"}`)
	f := r.recv()
	assert.Equal(t, "OK", f.str("op"))
	_, hasCorr := f["corr"]
	assert.False(t, hasCorr)
	r.send(`{"op":"PUBLISH","topic":"t","payload":{"a":1}}`)
	f = r.recv()
	assert.Equal(t, "OK", f.str("op"))
	assert.NotEmpty(t, f.str("id"))
	assert.Equal(t, float64(1), f.num("seq"))
	// A numeric corr is echoed as sent.
	r.send(`{"op":"PUBLISH","topic":"t","payload":2,"corr":7}`)
	f = r.recv()
	assert.Equal(t, float64(7), f.num("corr"))
}

func TestTokenExpiry(t *testing.T) {
	t.Parallel()
	// Tokens expire by the gateway's clock, a fake one here (the bus
	// keeps the system clock: no lease is involved).
	clk := clock.NewFake(time.Now())
	var lifetime atomic.Int64
	lifetime.Store(int64(300 * time.Millisecond))
	e := startEnv(t, Config{Clock: clk, Verifier: auth.VerifierFunc(func(_ context.Context, token string) (*auth.Principal, error) {
		switch token {
		case "expired":
			return nil, fmt.Errorf("token expired yesterday: %w", wsproto.ErrTokenExpired)
		case "stale":
			return &auth.Principal{Subject: "s", Expiry: clk.Now().Add(-time.Second), Policy: acl.AllowEverything()}, nil
		}
		return &auth.Principal{Subject: "u", Expiry: clk.Now().Add(time.Duration(lifetime.Load())), Policy: acl.AllowEverything()}, nil
	})}, nil)

	r := e.dial()
	r.send(`{"op":"AUTH","token":"expired","corr":"a1"}`)
	r.expectErr(wsproto.CodeTokenExpired, "a1")
	r.send(`{"op":"AUTH","token":"stale","corr":"a2"}`)
	r.expectErr(wsproto.CodeTokenExpired, "a2")

	// Refreshed before it expires, the connection outlives the first token.
	r.send(`{"op":"AUTH","token":"ok","corr":"a3"}`)
	r.expectOK("a3")
	lifetime.Store(int64(time.Hour))
	r.send(`{"op":"AUTH","token":"ok","corr":"a4"}`)
	r.expectOK("a4")
	clk.Advance(500 * time.Millisecond)
	r.noFrameFor(100 * time.Millisecond)
	r.publish("t", 1, "p1")

	// Not refreshed, it is closed with wsproto.CloseTokenExpired.
	lifetime.Store(int64(200 * time.Millisecond))
	r2 := e.dial()
	r2.send(`{"op":"AUTH","token":"ok","corr":"b1"}`)
	r2.expectOK("b1")
	clk.Advance(200 * time.Millisecond)
	ce := r2.expectClose(5 * time.Second)
	assert.Equal(t, wsproto.CloseTokenExpired, int(ce.Code))
	assert.Contains(t, ce.Reason, "token_expired")

	// The server is still up.
	e.authed().publish("t", 2, "p2")
}

func TestForbidden(t *testing.T) {
	t.Parallel()
	var allowSecret atomic.Bool
	allowSecret.Store(true)
	e := newEnv(t, func(c *Config) {
		// Everything but the secret topics, unless the token is "all" and
		// allowSecret holds.
		noSecret, err := acl.NewPolicy(
			acl.Rule{Effect: acl.Allow, Action: acl.AnyAction, Topics: []string{"**"}},
			acl.Rule{Effect: acl.Deny, Action: acl.AnyAction, Topics: []string{"secret.**"}},
		)
		require.NoError(t, err)
		c.Verifier = auth.VerifierFunc(func(_ context.Context, token string) (*auth.Principal, error) {
			if token == "all" && allowSecret.Load() {
				return &auth.Principal{Subject: "u", Policy: acl.AllowEverything()}, nil
			}
			return &auth.Principal{Subject: "u", Policy: noSecret}, nil
		})
	})
	r := e.dial()
	r.send(`{"op":"AUTH","token":"some","corr":"a"}`)
	r.expectOK("a")
	r.send(`{"op":"PUBLISH","topic":"secret.x","payload":1,"corr":"p"}`)
	r.expectErr(wsproto.CodeForbidden, "p")
	r.send(`{"op":"SUBSCRIBE","topic":"secret.x","group":"g","corr":"s"}`)
	r.expectErr(wsproto.CodeForbidden, "s")
	r.publish("public", 1, "p2")

	// A re-AUTH with less permission ends subscriptions it may not hold.
	r.send(`{"op":"AUTH","token":"all","corr":"a2"}`)
	r.expectOK("a2")
	r.subscribe("secret.x", "g", "s2", nil)
	allowSecret.Store(false)
	r.send(`{"op":"AUTH","token":"all","corr":"a3"}`)
	r.expectOK("a3")
	f := r.expectErr(wsproto.CodeForbidden, "")
	assert.Contains(t, f.str("msg"), "secret.x")
	assert.Equal(t, "secret.x", f.str("topic"))
	assert.Equal(t, "g", f.str("group"))
	r.send(`{"op":"PAUSE","topic":"secret.x","group":"g","corr":"x"}`)
	r.expectErr(wsproto.CodeNotSubscribed, "x")
}

func TestPublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	f := r.publish("orders", map[string]any{"n": 1}, "p1")
	assert.NotEmpty(t, f.str("id"))
	assert.Equal(t, float64(1), f.num("seq"))

	// opts reach the record; a repeated id is idempotent.
	r.send(`{"op":"PUBLISH","topic":"orders","payload":null,"corr":"p2","opts":{"id":"fixed-1","key":"k","headers":{"h":"v"},"tags":["a","b"],"caused_by":["c1"],"sid":"sess","ts":1234}}`)
	f = r.expectOK("p2")
	assert.Equal(t, "fixed-1", f.str("id"))
	assert.Equal(t, float64(2), f.num("seq"))
	r.send(`{"op":"PUBLISH","topic":"orders","payload":5,"corr":"p3","opts":{"id":"fixed-1"}}`)
	f = r.expectOK("p3")
	assert.Equal(t, "fixed-1", f.str("id"))
	assert.Equal(t, float64(2), f.num("seq"), "the stored event is returned, nothing new stored")

	rec, err := e.store.FindByID(context.Background(), "orders", "fixed-1")
	require.NoError(t, err)
	assert.Equal(t, "k", rec.Key)
	assert.Equal(t, map[string]string{"h": "v"}, rec.Headers)
	assert.Equal(t, []string{"a", "b"}, rec.Tags)
	assert.Equal(t, []string{"c1"}, rec.CausedBy)
	assert.Equal(t, "sess", rec.SID)
	assert.Equal(t, int64(1234), rec.TS)
	assert.JSONEq(t, "null", string(rec.Payload))
}

func TestPublishFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	e.store.fail.Store(true)
	r.send(`{"op":"PUBLISH","topic":"t","payload":1,"corr":"p"}`)
	f := r.expectErr(wsproto.CodePublishFailed, "p")
	assert.Contains(t, f.str("msg"), "disk on fire")
	e.store.fail.Store(false)
	r.publish("t", 1, "p2")
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.MaxPayload = 100; c.ReadLimit = 1000 })
	r := e.authed()
	big := strings.Repeat("x", 200)
	r.send(`{"op":"PUBLISH","topic":"t","payload":"` + big + `","corr":"p"}`)
	r.expectErr(wsproto.CodeTooLarge, "p")
	r.publish("t", "small", "p2")

	// Over the read limit, the frame closes the connection.
	r.send(`{"op":"PUBLISH","topic":"t","payload":"` + strings.Repeat("x", 2000) + `","corr":"p3"}`)
	ce := r.expectClose(5 * time.Second)
	assert.Equal(t, wsproto.CloseTooLarge, int(ce.Code))
	e.authed().publish("t", "still up", "p4")
}

func TestNeverAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.AuthTimeout = 200 * time.Millisecond })
	r := e.dial()
	r.send(`{"op":"SUBSCRIBE","topic":"t","group":"g","corr":"s"}`)
	r.expectErr(wsproto.CodeUnauthorized, "s")
	ce := r.expectClose(5 * time.Second)
	assert.Equal(t, wsproto.CloseAuthTimeout, int(ce.Code))
	assert.Contains(t, ce.Reason, "AUTH")
	e.authed().publish("t", "still up", "p")
}

func TestBadFrames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	tests := []struct {
		name  string
		frame string
		code  wsproto.Code
		corr  string
		field string // named in msg
	}{
		{"not JSON", `{"op":"PUBLISH",`, wsproto.CodeBadJSON, "", "JSON"},
		{"garbage", `hello`, wsproto.CodeBadJSON, "", "JSON"},
		{"not an object", `[1,2]`, wsproto.CodeBadFrame, "", "object"},
		{"no op", `{"corr":"c"}`, wsproto.CodeBadFrame, "c", "op"},
		{"unknown op", `{"op":"FROB","corr":"c"}`, wsproto.CodeBadFrame, "c", "FROB"},
		{"op not a string", `{"op":5,"corr":"c"}`, wsproto.CodeBadFrame, "c", "op"},
		{"publish no topic", `{"op":"PUBLISH","payload":1,"corr":"c"}`, wsproto.CodeBadFrame, "c", "topic"},
		{"publish no payload", `{"op":"PUBLISH","topic":"t","corr":"c"}`, wsproto.CodeBadFrame, "c", "payload"},
		{"publish bad topic", `{"op":"PUBLISH","topic":"a..b","payload":1,"corr":"c"}`, wsproto.CodeBadFrame, "c", "topic"},
		{"publish topic number", `{"op":"PUBLISH","topic":5,"payload":1,"corr":"c"}`, wsproto.CodeBadFrame, "c", "topic"},
		{"publish opts not object", `{"op":"PUBLISH","topic":"t","payload":1,"opts":"x","corr":"c"}`, wsproto.CodeBadFrame, "c", "opts"},
		{"publish headers wrong", `{"op":"PUBLISH","topic":"t","payload":1,"opts":{"headers":{"a":1}},"corr":"c"}`, wsproto.CodeBadFrame, "c", "headers"},
		{"publish id too long", `{"op":"PUBLISH","topic":"t","payload":1,"opts":{"id":"` + strings.Repeat("i", 300) + `"},"corr":"c"}`, wsproto.CodeBadFrame, "c", "id"},
		// Without group a SUBSCRIBE is live (live_test.go); an option of a
		// group is refused by name there.
		{"live subscribe with a group option", `{"op":"SUBSCRIBE","topic":"t","opts":{"maxInFlight":5},"corr":"c"}`, wsproto.CodeBadFrame, "c", "maxInFlight"},
		{"ack no group", `{"op":"ACK","topic":"t","id":"x","corr":"c"}`, wsproto.CodeBadFrame, "c", "group"},
		{"subscribe bad group", `{"op":"SUBSCRIBE","topic":"t","group":"g*","corr":"c"}`, wsproto.CodeBadFrame, "c", "group"},
		{"subscribe bad from", `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"from":"middle"},"corr":"c"}`, wsproto.CodeBadFrame, "c", "from"},
		{"subscribe seq missing", `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"from":"seq"},"corr":"c"}`, wsproto.CodeBadFrame, "c", "seq"},
		{"subscribe maxInFlight string", `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"maxInFlight":"9"},"corr":"c"}`, wsproto.CodeBadFrame, "c", "maxInFlight"},
		{"subscribe unknown afterId", `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"from":"afterId","afterId":"nope"},"corr":"c"}`, wsproto.CodeBadFrame, "c", "afterId"},
		{"ack no id", `{"op":"ACK","topic":"t","group":"g","corr":"c"}`, wsproto.CodeBadFrame, "c", "id"},
		{"modack no extend", `{"op":"MODACK","topic":"t","group":"g","id":"x","corr":"c"}`, wsproto.CodeBadFrame, "c", "extend_ms"},
		{"modack negative", `{"op":"MODACK","topic":"t","group":"g","id":"x","extend_ms":-5,"corr":"c"}`, wsproto.CodeBadFrame, "c", "extend_ms"},
		{"modack fractional", `{"op":"MODACK","topic":"t","group":"g","id":"x","extend_ms":1.5,"corr":"c"}`, wsproto.CodeBadFrame, "c", "extend_ms"},
		{"pause no topic", `{"op":"PAUSE","group":"g","corr":"c"}`, wsproto.CodeBadFrame, "c", "topic"},
		{"token number", `{"op":"AUTH","token":5,"corr":"c"}`, wsproto.CodeBadFrame, "c", "token"},
		{"corr object", `{"op":"AUTH","token":"x","corr":{}}`, wsproto.CodeBadFrame, "", "corr"},
	}
	for _, tt := range tests {
		r.send(tt.frame)
		f := r.expectErr(tt.code, tt.corr)
		assert.Contains(t, f.str("msg"), tt.field, tt.name)
	}
	// The connection is still up and still authenticated.
	r.publish("t", 1, "after")
	e.authed().publish("t", 2, "other")
}

func TestSubscribeEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	r.subscribe("orders", "billing", "s1", map[string]any{"from": "earliest"})
	r.send(`{"op":"SUBSCRIBE","topic":"orders","group":"billing","corr":"s2"}`)
	r.expectErr(wsproto.CodeAlreadySubscribed, "s2")

	p := e.authed()
	pub := p.publish("orders", map[string]any{"total": 42}, "p1")
	f := r.expectEvent()
	assert.Equal(t, "orders", f.str("topic"))
	assert.Equal(t, "billing", f.str("group"))
	ev := f.obj("event")
	assert.Equal(t, pub.str("id"), ev.str("id"))
	assert.Equal(t, float64(1), ev.num("seq"))
	assert.Equal(t, "orders", ev.str("topic"))
	assert.NotZero(t, ev.num("ts"))
	assert.Equal(t, map[string]any{"total": float64(42)}, ev["payload"])
	ctx := f.obj("ctx")
	assert.Equal(t, float64(1), ctx.num("attempt"))
	assert.Greater(t, ctx.num("ack_deadline_ms"), float64(20_000))
	assert.LessOrEqual(t, ctx.num("ack_deadline_ms"), float64(30_000))

	r.send(ack("ACK", "orders", "billing", ev.str("id"), "a1"))
	r.expectOK("a1")
	r.send(ack("ACK", "orders", "billing", ev.str("id"), "a2"))
	r.expectOK("a2") // idempotent
	r.send(ack("NACK", "orders", "billing", "never-sent", "a3"))
	r.expectOK("a3")
	r.send(`{"op":"MODACK","topic":"orders","group":"billing","id":"` + ev.str("id") + `","extend_ms":1000,"corr":"m1"}`)
	r.expectErr(wsproto.CodeUnknownID, "m1")

	r.send(`{"op":"UNSUBSCRIBE","topic":"orders","group":"billing","corr":"u1"}`)
	r.expectOK("u1")
	for _, op := range []string{"UNSUBSCRIBE", "PAUSE", "RESUME"} {
		r.send(`{"op":"` + op + `","topic":"orders","group":"billing","corr":"u2"}`)
		r.expectErr(wsproto.CodeNotSubscribed, "u2")
	}
	r.send(ack("ACK", "orders", "billing", ev.str("id"), "a4"))
	r.expectErr(wsproto.CodeNotSubscribed, "a4")
	r.send(`{"op":"MODACK","topic":"orders","group":"billing","id":"x","extend_ms":5,"corr":"m2"}`)
	r.expectErr(wsproto.CodeNotSubscribed, "m2")
}

func TestNackRedelivers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	r.subscribe("t", "g", "s", nil)
	id := e.authed().publish("t", 1, "p").str("id")
	f := r.expectEvent()
	require.Equal(t, id, f.obj("event").str("id"))
	r.send(`{"op":"NACK","topic":"t","group":"g","id":"` + id + `","reason":"not now","corr":"n"}`)
	r.expectOK("n")
	f = r.expectEvent()
	assert.Equal(t, id, f.obj("event").str("id"))
	assert.Equal(t, float64(2), f.obj("ctx").num("attempt"))
}

func TestStaleAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)

	// Redelivered to the same client: an ACK naming attempt 1 is stale; an
	// ACK naming none settles the attempt sent last.
	a := e.authed()
	a.subscribe("t", "g", "s", map[string]any{"ackTimeoutMs": 200})
	id := e.authed().publish("t", 1, "p").str("id")
	require.Equal(t, float64(1), a.expectEvent().obj("ctx").num("attempt"))
	require.Equal(t, float64(2), a.expectEvent().obj("ctx").num("attempt"))
	a.send(`{"op":"ACK","topic":"t","group":"g","id":"` + id + `","attempt":1,"corr":"x1"}`)
	f := a.expectErr(wsproto.CodeAckFailed, "x1")
	assert.Contains(t, f.str("msg"), "attempt 1")
	a.send(ack("ACK", "t", "g", id, "x2"))
	a.expectOK("x2")

	// Redelivered to another client of the group: the first client's ACK
	// is refused and the second one's settles it.
	b := e.authed()
	b.subscribe("t2", "g", "s", map[string]any{"ackTimeoutMs": 300})
	c := e.authed()
	id = c.publish("t2", 1, "p").str("id")
	require.Equal(t, float64(1), b.expectEvent().obj("ctx").num("attempt"))
	b.send(`{"op":"PAUSE","topic":"t2","group":"g","corr":"pa"}`)
	b.expectOK("pa")
	c.subscribe("t2", "g", "s", nil)
	f = c.expectEvent()
	require.Equal(t, id, f.obj("event").str("id"))
	require.Equal(t, float64(2), f.obj("ctx").num("attempt"))
	b.send(ack("ACK", "t2", "g", id, "b1"))
	b.expectErr(wsproto.CodeAckFailed, "b1")
	c.send(ack("ACK", "t2", "g", id, "c1"))
	c.expectOK("c1")
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	r.subscribe("t", "g", "s", nil)
	r.send(`{"op":"PAUSE","topic":"t","group":"g","corr":"pa"}`)
	r.expectOK("pa")
	p := e.authed()
	for i := 0; i < 3; i++ {
		p.publish("t", i, fmt.Sprint("p", i))
	}
	require.Eventually(t, func() bool {
		for _, st := range e.bus.Stats() {
			if st.Topic == "t" && st.Buffered == 3 {
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond)
	r.noFrameFor(100 * time.Millisecond)
	r.send(`{"op":"RESUME","topic":"t","group":"g","corr":"re"}`)
	// RESUME lets the buffered events go at once: they may come before or
	// after its OK (the protocol orders answers, not deliveries among them),
	// and among themselves in seq order.
	var payloads []float64
	resumed := false
	for len(payloads) < 3 || !resumed {
		f := r.recv()
		switch f.str("op") {
		case "OK":
			require.Equal(t, "re", f.str("corr"))
			resumed = true
		case "EVENT":
			payloads = append(payloads, f.obj("event").num("payload"))
		default:
			t.Fatalf("unexpected frame %v", f)
		}
	}
	assert.Equal(t, []float64{0, 1, 2}, payloads)
}

func TestRateLimitedAndSubscriptionLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) {
		c.RateLimits.Publish.Rate, c.RateLimits.Publish.Burst = 0.001, 2
		c.MaxSubscriptions = 1
	})
	r := e.authed()
	r.publish("t", 1, "p1")
	r.publish("t", 2, "p2")
	r.send(`{"op":"PUBLISH","topic":"t","payload":3,"corr":"p3"}`)
	r.expectErr(wsproto.CodeRateLimited, "p3")
	r.subscribe("t", "g1", "s1", nil)
	r.send(`{"op":"SUBSCRIBE","topic":"t","group":"g2","corr":"s2"}`)
	r.expectErr(wsproto.CodeRateLimited, "s2")
}

func TestNewGatewayValidates(t *testing.T) {
	t.Parallel()
	_, err := NewGateway(Config{MaxInFlight: -1})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrInvalid))
	for _, field := range []string{"Bus", "Verifier", "MaxInFlight"} {
		assert.ErrorContains(t, err, field)
	}
}
