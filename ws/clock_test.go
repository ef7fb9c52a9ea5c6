package ws

import (
	"context"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The auth timeout, pings and token expiry run on Config.Clock: moving a
// fake clock fires them, with no wait on the wall clock.
func TestClockDrivesTimers(t *testing.T) {
	t.Parallel()
	// newClockEnv: pings every pingInterval (negative: none), tokens that
	// last lifetime (0: forever).
	newClockEnv := func(t *testing.T, pingInterval, lifetime time.Duration) (*testEnv, *clock.Fake, *recObserver) {
		clk := clock.NewFake(time.Now())
		obs := &recObserver{}
		cfg := Config{Clock: clk, Observer: obs, PingInterval: pingInterval, PingTimeout: time.Minute}
		cfg.Verifier = auth.VerifierFunc(func(_ context.Context, token string) (*auth.Principal, error) {
			if token == "" { // a connection must AUTH
				return nil, &auth.TokenError{Reason: auth.ErrUnknownToken}
			}
			p := &auth.Principal{Subject: "u", Policy: acl.AllowEverything()}
			if lifetime > 0 {
				p.Expiry = clk.Now().Add(lifetime)
			}
			return p, nil
		})
		// The bus keeps the system clock: its timers would count among
		// the fake's.
		return startEnv(t, cfg, nil), clk, obs
	}
	waitTimers := func(t *testing.T, clk *clock.Fake, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, clk.WaitTimers(ctx, n))
	}

	t.Run("auth timeout", func(t *testing.T) {
		t.Parallel()
		e, clk, _ := newClockEnv(t, -1, 0)
		r := e.dial()
		waitTimers(t, clk, 1)
		clk.Advance(DefaultAuthTimeout)
		assert.Equal(t, wsproto.CloseAuthTimeout, int(r.expectClose(5*time.Second).Code))
	})

	t.Run("token expiry", func(t *testing.T) {
		t.Parallel()
		e, clk, _ := newClockEnv(t, -1, time.Hour)
		r := e.dial()
		r.auth("any", "a")
		r.expectOK("a")
		// The gateway keeps one timer for the deadlines of all its
		// connections (the auth timeout, then the expiry, known before
		// the OK).
		waitTimers(t, clk, 1)
		clk.Advance(time.Hour)
		ce := r.expectClose(5 * time.Second)
		assert.Equal(t, wsproto.CloseTokenExpired, int(ce.Code))
	})

	t.Run("ping timeout", func(t *testing.T) {
		t.Parallel()
		e, clk, obs := newClockEnv(t, time.Hour, 0)
		ctx := context.Background()
		c, _, err := websocket.Dial(ctx, e.url, nil) // never reads: no pongs
		require.NoError(t, err)
		defer c.CloseNow()
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"op":"AUTH","token":"any"}`)))
		require.Eventually(t, func() bool {
			obs.mu.Lock()
			defer obs.mu.Unlock()
			return obs.handled["AUTH/"] == 1
		}, 5*time.Second, time.Millisecond)
		waitTimers(t, clk, 1) // the gateway's, for the auth timeout and the ping interval
		clk.Advance(time.Hour)
		waitTimers(t, clk, 2) // the gateway's for the next ping, and the ping timeout
		clk.Advance(time.Minute)
		require.Eventually(t, func() bool { return len(obs.closed()) == 1 }, 5*time.Second, 10*time.Millisecond)
		assert.Equal(t, []int{wsproto.ClosePingTimeout}, obs.closed())
	})
}
