package ws

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/ratelimit"
)

// dialFrom dials with X-Forwarded-For set to xff (none if empty).
func (e *testEnv) dialFrom(xff string) *raw {
	e.t.Helper()
	h := http.Header{}
	if xff != "" {
		h.Set("X-Forwarded-For", xff)
	}
	return e.dialWith(h)
}

// expectTooManyFailed reads the close of a connection that failed AUTH
// too often.
func (r *raw) expectTooManyFailed() {
	r.t.Helper()
	ce := r.expectClose(5 * time.Second)
	assert.Equal(r.t, wsproto.CloseTooManyFailedAuth, int(ce.Code))
	assert.Equal(r.t, "too many failed auth", ce.Reason)
}

// Three refused AUTH in a row close the connection with 4403; a good AUTH
// after two refusals still works and starts the count again, on a fresh
// connection and on an authenticated one.
func TestFailedAuthClosesConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)

	r := e.dial()
	r.send(`{"op":"AUTH","token":"wrong","corr":"a1"}`)
	r.expectErr(wsproto.CodeAuthFailed, "a1")
	r.send(`{"op":"AUTH","token":"wrong","corr":"a2"}`)
	r.expectErr(wsproto.CodeAuthFailed, "a2")
	r.send(`{"op":"AUTH","token":"` + testToken + `","corr":"a3"}`)
	r.expectOK("a3")
	for _, corr := range []string{"b1", "b2"} {
		r.send(`{"op":"AUTH","token":"wrong","corr":"` + corr + `"}`)
		r.expectErr(wsproto.CodeAuthFailed, corr)
	}
	r.publish("t", 1, "p1") // still authenticated
	r.send(`{"op":"AUTH","token":"wrong","corr":"b3"}`)
	r.expectTooManyFailed()

	r = e.dial()
	r.send(`{"op":"AUTH","token":"x","corr":"c1"}`)
	r.expectErr(wsproto.CodeAuthFailed, "c1")
	r.send(`{"op":"AUTH","corr":"c2"}`)
	r.expectErr(wsproto.CodeAuthFailed, "c2")
	r.send(`{"op":"AUTH","token":"y","corr":"c3"}`)
	r.expectTooManyFailed()

	e.authed().publish("t", 2, "p2") // the server is still up
}

// Refused AUTH are limited per client address (default 10/s, burst 20):
// once an address has spent its burst, even a good token is answered
// rate_limited, without being checked, until a token refills; another
// address is unaffected. Behind trusted proxies (127.0.0.0/8 here, as the
// test connects from 127.0.0.1) the address is X-Forwarded-For's.
func TestFailedAuthLimitPerAddress(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now()) // no token refills until Advance
	e := newEnv(t, func(c *Config) {
		c.Clock = clk
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	const attacker, other = "198.51.100.1", "198.51.100.2"
	// 6 connections x 3 refusals, then 2 more: the burst of 20 is spent.
	for range 6 {
		r := e.dialFrom(attacker)
		r.send(`{"op":"AUTH","token":"wrong","corr":"1"}`)
		r.expectErr(wsproto.CodeAuthFailed, "1")
		r.send(`{"op":"AUTH","token":"wrong","corr":"2"}`)
		r.expectErr(wsproto.CodeAuthFailed, "2")
		r.send(`{"op":"AUTH","token":"wrong","corr":"3"}`)
		r.expectTooManyFailed()
	}
	r := e.dialFrom(attacker)
	r.send(`{"op":"AUTH","token":"wrong","corr":"19"}`)
	r.expectErr(wsproto.CodeAuthFailed, "19")
	r.send(`{"op":"AUTH","token":"wrong","corr":"20"}`)
	r.expectErr(wsproto.CodeAuthFailed, "20")

	r = e.dialFrom(attacker)
	r.send(`{"op":"AUTH","token":"` + testToken + `","corr":"good"}`)
	f := r.expectErr(wsproto.CodeRateLimited, "good")
	assert.Contains(t, f.str("msg"), "failed AUTH")

	o := e.dialFrom(other)
	o.send(`{"op":"AUTH","token":"wrong","corr":"o1"}`)
	o.expectErr(wsproto.CodeAuthFailed, "o1")
	o.send(`{"op":"AUTH","token":"` + testToken + `","corr":"o2"}`)
	o.expectOK("o2")

	clk.Advance(100 * time.Millisecond) // one token at 10/s
	r.send(`{"op":"AUTH","token":"` + testToken + `","corr":"later"}`)
	r.expectOK("later")
	r.publish("t", 1, "p1")
}

// Without trusted proxies X-Forwarded-For is ignored: a client that
// writes another address on each connection is still one address. With
// 127.0.0.0/8 trusted, the same header is honoured.
func TestFailedAuthIgnoresSpoofedForwardedFor(t *testing.T) {
	t.Parallel()
	for _, trusted := range []bool{false, true} {
		clk := clock.NewFake(time.Now())
		e := newEnv(t, func(c *Config) {
			c.Clock = clk
			c.FailedAuthLimit = ratelimit.Limit{Rate: 1, Burst: 2}
			if trusted {
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
			}
		})
		for i, xff := range []string{"203.0.113.1", "203.0.113.2"} {
			want := wsproto.CodeAuthFailed
			if !trusted && i == 1 {
				want = wsproto.CodeRateLimited // the bucket of the peer, 127.0.0.1, is spent
			}
			r := e.dialFrom(xff)
			r.send(`{"op":"AUTH","token":"wrong","corr":"a"}`)
			r.expectErr(want, "a")
			r.send(`{"op":"AUTH","token":"wrong","corr":"b"}`)
			r.expectErr(want, "b")
		}
		r := e.dialFrom("203.0.113.3")
		r.send(`{"op":"AUTH","token":"` + testToken + `","corr":"c"}`)
		if trusted {
			r.expectOK("c")
		} else {
			r.expectErr(wsproto.CodeRateLimited, "c")
		}
	}
}

func TestFailedAuthConfig(t *testing.T) {
	t.Parallel()
	bus := newEnv(t, nil).bus
	for _, tt := range []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"negative max", func(c *Config) { c.MaxFailedAuth = -1 }, "MaxFailedAuth"},
		{"negative rate", func(c *Config) { c.FailedAuthLimit.Rate = -1 }, "FailedAuthLimit"},
		{"burst without rate", func(c *Config) { c.FailedAuthLimit.Burst = 5 }, "FailedAuthLimit"},
		{"zero prefix", func(c *Config) { c.TrustedProxies = []netip.Prefix{{}} }, "TrustedProxies"},
	} {
		cfg := Config{Bus: bus, Verifier: auth.StaticTokens(testToken)}
		tt.mod(&cfg)
		_, err := NewGateway(cfg)
		assert.ErrorContains(t, err, tt.field, tt.name)
	}
	g, err := NewGateway(Config{Bus: bus, Verifier: auth.StaticTokens(testToken)})
	require.NoError(t, err)
	assert.Equal(t, DefaultMaxFailedAuth, g.cfg.MaxFailedAuth)
	assert.Equal(t, ratelimit.Limit{Rate: 10, Burst: 20}, g.cfg.FailedAuthLimit)
	assert.Empty(t, g.cfg.TrustedProxies)
}
