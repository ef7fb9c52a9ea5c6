package ws

import (
	"context"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
)

// A gateway whose Verifier takes an empty token (auth.OpenAccess) lets a
// client SUBSCRIBE and PUBLISH as its first frames, with no AUTH; an AUTH
// still works there. One whose Verifier refuses the empty token wants AUTH
// first, as before.
func TestNoTokenOpenAccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.Verifier = auth.OpenAccess() })

	sub := e.dial()
	sub.subscribe("orders", "billing", "s1", map[string]any{"from": "earliest"})
	live := e.dial()
	live.liveSubscribe("orders", "l1", nil)

	pub := e.dial()
	pub.publish("orders", map[string]any{"n": 1}, "p1")
	ev := sub.expectEvent()
	assert.Equal(t, "orders", ev.str("topic"))
	assert.Equal(t, "billing", ev.str("group"))
	sub.send(ack("ACK", "orders", "billing", ev.obj("event").str("id"), "a1"))
	sub.expectOK("a1")
	assert.Equal(t, "orders", live.expectEvent().str("topic"))

	// AUTH is still answered, and the connection goes on.
	pub.send(`{"op":"AUTH","token":"anything","corr":"auth"}`)
	pub.expectOK("auth")
	pub.publish("orders", map[string]any{"n": 2}, "p2")
	assert.Equal(t, "orders", sub.expectEvent().str("topic"))

	require.Eventually(t, func() bool { return e.gw.Stats().Authenticated == 3 }, 5*time.Second, time.Millisecond)
}

func TestNoTokenRefusedWantsAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // auth.StaticTokens(testToken): the empty token is refused
	r := e.dial()
	r.send(`{"op":"SUBSCRIBE","topic":"orders","group":"billing","corr":"s"}`)
	f := r.expectErr(wsproto.CodeUnauthorized, "s")
	assert.Contains(t, f.str("msg"), "AUTH")
	r.send(`{"op":"PUBLISH","topic":"orders","payload":1,"corr":"p"}`)
	r.expectErr(wsproto.CodeUnauthorized, "p")
	// Frames before AUTH are not failed AUTHs: the connection is not
	// closed for them, and AUTH then works.
	for range DefaultMaxFailedAuth + 1 {
		r.send(`{"op":"UNSUBSCRIBE","topic":"orders","group":"billing","corr":"u"}`)
		r.expectErr(wsproto.CodeUnauthorized, "u")
	}
	r.send(`{"op":"AUTH","token":"` + testToken + `","corr":"a"}`)
	r.expectOK("a")
	r.subscribe("orders", "billing", "s2", nil)
	assert.Equal(t, 1, e.gw.Stats().Authenticated)
}

// A Verifier that takes the empty token as a guest with a narrow policy
// and real tokens as their subjects: the guest's first AUTH may name any
// subject, and its subscriptions are checked against the new policy; from
// then on the connection keeps that subject.
func TestNoTokenThenAuthAnySubject(t *testing.T) {
	t.Parallel()
	guest, err := acl.NewPolicy(
		acl.Rule{Effect: acl.Allow, Action: acl.Subscribe, Topics: []string{"public.**"}},
		acl.Rule{Effect: acl.Allow, Action: acl.Publish, Topics: []string{"public.**"}},
	)
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) {
		c.Verifier = auth.VerifierFunc(func(_ context.Context, token string) (*auth.Principal, error) {
			switch token {
			case "":
				return &auth.Principal{Subject: "guest", Policy: guest}, nil
			case "alice", "bob":
				return &auth.Principal{Subject: token, Policy: acl.AllowEverything()}, nil
			}
			return nil, &auth.TokenError{Reason: auth.ErrUnknownToken}
		})
	})
	r := e.dial()
	r.subscribe("public.news", "g", "s1", nil)
	r.send(`{"op":"SUBSCRIBE","topic":"private.mail","group":"g","corr":"s2"}`)
	r.expectErr(wsproto.CodeForbidden, "s2")

	r.send(`{"op":"AUTH","token":"alice","corr":"a1"}`)
	r.expectOK("a1")
	r.subscribe("private.mail", "g", "s3", nil)
	r.send(`{"op":"AUTH","token":"bob","corr":"a2"}`)
	f := r.expectErr(wsproto.CodeAuthFailed, "a2")
	assert.Contains(t, f.str("msg"), `"alice"`)
}

// A connection authenticated with no token has no auth timeout: it may
// stay quiet and SUBSCRIBE later. The clock is the gateway's, moved by
// hand: no timer is armed for such a connection, while one is for a
// connection that must AUTH.
func TestNoTokenNoAuthTimeout(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	e := startEnv(t, Config{Clock: clk, PingInterval: -1, Verifier: auth.OpenAccess()}, nil)
	quiet := e.dial()
	quiet.publish("t", 1, "p0") // served: the connection's deadlines are set
	assert.Zero(t, clk.Timers())
	clk.Advance(10 * DefaultAuthTimeout)
	quiet.subscribe("t", "g", "s", map[string]any{"from": "earliest"})
	assert.Equal(t, "t", quiet.expectEvent().str("topic"))

	clk2 := clock.NewFake(time.Now())
	e2 := startEnv(t, Config{Clock: clk2, PingInterval: -1, Verifier: auth.StaticTokens(testToken)}, nil)
	r := e2.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, clk2.WaitTimers(ctx, 1)) // the auth timeout
	clk2.Advance(DefaultAuthTimeout)
	assert.Equal(t, wsproto.CloseAuthTimeout, int(r.expectClose(5*time.Second).Code))
}
