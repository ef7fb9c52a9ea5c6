package ws

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
	"github.com/promethean/promlib/ws/wsclient"
)

// These tests run the gateway with an auth.JWTVerifier over a real
// auth.Verifier, end to end through a raw WebSocket, the Go client and
// HTTP publish.

var jwtSecret = []byte("0123456789abcdef0123456789abcdef") // HS256, 32 bytes

// mint signs an HS256 token for sub that expires at exp (to the
// microsecond: exp may be fractional) with the given scopes.
func mint(t testing.TB, sub string, exp time.Time, scopes ...string) string {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"sub":   sub,
		"exp":   float64(exp.UnixMicro()) / 1e6,
		"scope": strings.Join(scopes, " "),
	})
	require.NoError(t, err)
	tok, err := jws.Sign(payload, jws.WithKey(jwa.HS256, jwtSecret))
	require.NoError(t, err)
	return string(tok)
}

// newJWTEnv starts a gateway whose AUTH verifies HS256 tokens signed with
// jwtSecret, with the given leeway.
func newJWTEnv(t *testing.T, leeway time.Duration, mod func(*auth.Config, *Config)) *testEnv {
	t.Helper()
	acfg := auth.Config{Secrets: []auth.Secret{{Key: jwtSecret}}, Leeway: leeway}
	var gcfg Config
	if mod != nil {
		mod(&acfg, &gcfg)
	}
	v, err := auth.NewJWTVerifier(acfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() }) // after the gateway's cleanup
	return newEnv(t, func(c *Config) {
		c.Verifier = v
		if gcfg.Clock != nil {
			c.Clock = gcfg.Clock
		}
	})
}

func (r *raw) auth(token, corr string) {
	r.t.Helper()
	r.send(map[string]any{"op": "AUTH", "token": token, "corr": corr})
}

// shiftedClock is the system clock moved by an offset that Advance
// grows: its time jumps and flows on, and its timers are the system's, so
// a jump fires none of them.
type shiftedClock struct{ offset atomic.Int64 }

func (c *shiftedClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}
func (c *shiftedClock) Advance(d time.Duration)            { c.offset.Add(int64(d)) }
func (*shiftedClock) NewTimer(d time.Duration) clock.Timer { return clock.System().NewTimer(d) }
func (*shiftedClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.System().AfterFunc(d, f)
}

func TestJWTScopes(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t, 0, nil)
	hour := time.Now().Add(time.Hour)
	r := e.dial()

	r.auth("not.a.jwt", "a0")
	f := r.expectErr(wsproto.CodeAuthFailed, "a0")
	assert.Contains(t, f.str("msg"), "auth: malformed token")
	r.auth(mint(t, "alice", time.Now().Add(-time.Second), "publish:a.*"), "a1")
	f = r.expectErr(wsproto.CodeTokenExpired, "a1")
	assert.Contains(t, f.str("msg"), "expired at")
	r.send(`{"op":"PUBLISH","topic":"a.b","payload":1,"corr":"p0"}`)
	r.expectErr(wsproto.CodeUnauthorized, "p0")

	r.auth(mint(t, "alice", hour, "publish:a.*"), "a2")
	r.expectOK("a2")
	r.publish("a.b", 1, "p1")
	f = r.send2(`{"op":"PUBLISH","topic":"b.c","payload":2,"corr":"p2"}`, wsproto.CodeForbidden, "p2")
	assert.Contains(t, f.str("msg"), `"b.c"`)
	r.send2(`{"op":"PUBLISH","topic":"a.b.c","payload":3,"corr":"p3"}`, wsproto.CodeForbidden, "p3") // * is one segment
	r.send2(`{"op":"SUBSCRIBE","topic":"a.b","group":"g","corr":"s1"}`, wsproto.CodeForbidden, "s1")

	// Only a.b was stored.
	head, err := e.store.Head(context.Background(), "a.b")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), head)
	head, err = e.store.Head(context.Background(), "b.c")
	require.NoError(t, err)
	assert.Zero(t, head)
}

// send2 sends a frame and expects an ERR with code and corr.
func (r *raw) send2(frame string, code wsproto.Code, corr string) frame {
	r.t.Helper()
	r.send(frame)
	return r.expectErr(code, corr)
}

// TestJWTExpiryCutsOff: a token that is not refreshed ends the connection
// with 4401 at exp plus the leeway, not before; no event published after
// that instant is delivered. A token past exp but within the leeway is
// still accepted, as the verifier accepts it.
func TestJWTExpiryCutsOff(t *testing.T) {
	t.Parallel()
	const leeway = 500 * time.Millisecond
	e := newJWTEnv(t, leeway, nil)

	// Past exp, within the leeway: accepted, and cut off at exp+leeway.
	exp := time.Now().Add(-100 * time.Millisecond)
	r := e.dial()
	r.auth(mint(t, "alice", exp, "subscribe:a.**"), "a")
	r.expectOK("a")
	r.subscribe("a.b", "g", "s", nil)

	// Publish all along, until well after the cut-off.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			_, _ = e.bus.Publish(context.Background(), "a.b", []byte(`1`))
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	cutoff := exp.Add(leeway)
	events := 0
	deadline := time.After(10 * time.Second)
	for closed := false; !closed; {
		select {
		case m := <-r.rd:
			if m.err != nil {
				assert.Equal(t, wsproto.CloseTokenExpired, int(websocket.CloseStatus(m.err)), "%v", m.err)
				closed = true
				break
			}
			var f frame
			require.NoError(t, json.Unmarshal(m.data, &f))
			require.Equal(t, "EVENT", f.str("op"), "%v", f)
			events++
			// Sent before the cut-off, so published before it.
			assert.LessOrEqual(t, int64(f.obj("event").num("ts")), cutoff.UnixMilli())
		case <-deadline:
			t.Fatal("not closed")
		}
	}
	assert.False(t, time.Now().Before(cutoff), "closed before exp+leeway")
	assert.Positive(t, events, "events were delivered before the cut-off")
}

// TestJWTNoEventAfterExpiry: the writer checks the expiry before every
// EVENT, whatever the timer does. The gateway's clock is moved past exp
// while the timer (set by the real clock) is an hour away: the next event
// is not sent, and the connection is closed with 4401.
func TestJWTNoEventAfterExpiry(t *testing.T) {
	t.Parallel()
	clk := &shiftedClock{}
	e := newJWTEnv(t, 0, func(a *auth.Config, g *Config) {
		a.Clock = clk
		g.Clock = clk
	})
	r := e.dial()
	// A whole second, as a JWT's exp: the token has expired once the
	// clock has advanced by an hour.
	r.auth(mint(t, "alice", clk.Now().Truncate(time.Second).Add(time.Hour), "subscribe:a.**", "publish:a.**"), "a")
	r.expectOK("a")
	r.subscribe("a.b", "g", "s", nil)
	ctx := context.Background()
	_, err := e.bus.Publish(ctx, "a.b", []byte(`"before"`))
	require.NoError(t, err)
	f := r.expectEvent()
	assert.Equal(t, `"before"`, string(mustJSON(t, f.obj("event")["payload"])))
	r.send(ack("ACK", "a.b", "g", f.obj("event").str("id"), "k"))
	r.expectOK("k")

	clk.Advance(time.Hour)
	r.send2(`{"op":"PUBLISH","topic":"a.b","payload":1,"corr":"p"}`, wsproto.CodeTokenExpired, "p")
	_, err = e.bus.Publish(ctx, "a.b", []byte(`"after"`))
	require.NoError(t, err)
	select {
	case m := <-r.rd: // the close, not the EVENT
		require.Error(t, m.err, "got a frame after expiry: %s", m.data)
		assert.Equal(t, wsproto.CloseTokenExpired, int(websocket.CloseStatus(m.err)), "%v", m.err)
	case <-time.After(5 * time.Second):
		t.Fatal("not closed after expiry")
	}

	// The event went back to the group: another member gets it.
	r2 := e.dial()
	r2.auth(mint(t, "bob", clk.Now().Add(time.Hour), "subscribe:a.**"), "a")
	r2.expectOK("a")
	r2.subscribe("a.b", "g", "s", nil)
	f = r2.expectEvent()
	assert.Equal(t, `"after"`, string(mustJSON(t, f.obj("event")["payload"])))
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// fakeJWTEnv is newJWTEnv with the gateway, the verifier and the bus on
// one fake clock, at a whole second as a JWT's exp is: a token expires
// when the test moves the clock, however slow the machine.
func fakeJWTEnv(t *testing.T) (*testEnv, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Now().Truncate(time.Second))
	return newJWTEnv(t, 0, func(a *auth.Config, g *Config) {
		a.Clock = clk
		g.Clock = clk
	}), clk
}

// TestJWTRefresh: AUTH with a fresh token before expiry keeps the
// connection and its subscriptions past the first token's expiry.
func TestJWTRefresh(t *testing.T) {
	t.Parallel()
	e, clk := fakeJWTEnv(t)
	scopes := []string{"subscribe:a.**", "publish:a.**"}
	r := e.dial()
	r.auth(mint(t, "alice", clk.Now().Add(time.Second), scopes...), "a1")
	r.expectOK("a1")
	r.subscribe("a.b", "g", "s", nil)
	r.auth(mint(t, "alice", clk.Now().Add(time.Hour), scopes...), "a2")
	r.expectOK("a2")

	clk.Advance(2 * time.Second)         // past the first token's expiry; its timer fires
	r.noFrameFor(300 * time.Millisecond) // no close, no ERR
	// Every frame is judged against the clock: with the first token this
	// PUBLISH would be refused with token_expired.
	r.publish("a.x", 1, "p")
	_, err := e.bus.Publish(context.Background(), "a.b", []byte(`2`))
	require.NoError(t, err)
	f := r.expectEvent()
	assert.Equal(t, "a.b", f.str("topic"))
}

// TestJWTReauthNarrows: a re-AUTH whose policy no longer allows a
// subscription ends it with an ERR forbidden naming it; the others stay.
func TestJWTReauthNarrows(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t, 0, nil)
	hour := time.Now().Add(time.Hour)
	r := e.dial()
	r.auth(mint(t, "alice", hour, "subscribe:a.**", "subscribe:x.**"), "a1")
	r.expectOK("a1")
	r.subscribe("a.b", "g1", "s1", nil)
	r.subscribe("x.y", "g2", "s2", nil)

	r.auth(mint(t, "alice", hour, "subscribe:x.**"), "a2")
	r.expectOK("a2")
	f := r.expectErr(wsproto.CodeForbidden, "")
	assert.Equal(t, "a.b", f.str("topic"))
	assert.Equal(t, "g1", f.str("group"))
	assert.Contains(t, f.str("msg"), "ended after AUTH")

	ctx := context.Background()
	_, err := e.bus.Publish(ctx, "a.b", []byte(`1`))
	require.NoError(t, err)
	_, err = e.bus.Publish(ctx, "x.y", []byte(`2`))
	require.NoError(t, err)
	f = r.expectEvent()
	assert.Equal(t, "x.y", f.str("topic"), "only the allowed subscription delivers")
	r.send2(`{"op":"UNSUBSCRIBE","topic":"a.b","group":"g1","corr":"u"}`, wsproto.CodeNotSubscribed, "u")
}

// TestJWTReauthOtherSubject: a connection keeps its subject; AUTH with a
// token of another one is refused and the old principal, with its
// policy, stays.
func TestJWTReauthOtherSubject(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t, 0, nil)
	hour := time.Now().Add(time.Hour)
	r := e.dial()
	r.auth(mint(t, "alice", hour, "publish:a.*"), "a1")
	r.expectOK("a1")
	r.auth(mint(t, "bob", hour, "publish:**"), "a2")
	f := r.expectErr(wsproto.CodeAuthFailed, "a2")
	assert.Contains(t, f.str("msg"), `"bob"`)
	assert.Contains(t, f.str("msg"), `"alice"`)
	r.publish("a.b", 1, "p1")
	r.send2(`{"op":"PUBLISH","topic":"b.c","payload":1,"corr":"p2"}`, wsproto.CodeForbidden, "p2")
}

// TestJWTKeysUnavailable: when the key set cannot be fetched, AUTH is
// answered internal (the token may be fine) and HTTP publish 503.
func TestJWTKeysUnavailable(t *testing.T) {
	t.Parallel()
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(jwks.Close)
	e := newJWTEnv(t, 0, func(a *auth.Config, _ *Config) {
		a.Secrets = nil
		a.JWKS = auth.JWKSConfig{URL: jwks.URL, FetchTimeout: time.Second}
	})
	r := e.dial()
	r.auth(mint(t, "alice", time.Now().Add(time.Hour)), "a")
	f := r.expectErr(wsproto.CodeInternal, "a")
	assert.Contains(t, f.str("msg"), "signing keys are unavailable")

	req, err := newRequest(e.srv.URL+"/publish/a.b", mint(t, "alice", time.Now().Add(time.Hour)), `1`)
	require.NoError(t, err)
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body httpx.ErrorBody
	require.NoError(t, decodeJSON(resp.Body, &body))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, auth.CodeAuthUnavailable, body.Error.Code)
}

// TestJWTHTTPPublish: HTTP publish takes the same tokens and policy.
func TestJWTHTTPPublish(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t, 0, nil)
	hour := time.Now().Add(time.Hour)
	good := mint(t, "alice", hour, "publish:a.*")
	tests := []struct {
		name    string
		topic   string
		header  string // Authorization
		status  int
		code    string
		wwwAuth string
	}{
		{"no token", "a.b", "", 401, "unauthorized", "Bearer"},
		{"not bearer", "a.b", "Basic YWxpY2U6cHc=", 401, "unauthorized", "Bearer"},
		{"bad token", "a.b", "Bearer x.y.z", 401, "auth_failed", `Bearer error="invalid_token"`},
		{"bad signature", "a.b", "Bearer " + good[:len(good)-4] + "AAAA", 401, "auth_failed", `Bearer error="invalid_token"`},
		{"expired", "a.b", "Bearer " + mint(t, "alice", time.Now().Add(-time.Minute), "publish:a.*"), 401, "token_expired", `Bearer error="invalid_token"`},
		{"forbidden topic", "b.c", "Bearer " + good, 403, "forbidden", ""},
		{"allowed", "a.b", "Bearer " + good, 200, "", ""},
		{"scheme case", "a.c", "bearer " + good, 200, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/publish/"+tt.topic, strings.NewReader(`{"n":1}`))
			require.NoError(t, err)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := e.srv.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tt.status, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.Equal(t, tt.wwwAuth, resp.Header.Get("WWW-Authenticate"))
			if tt.status == 200 {
				var out wsproto.Published
				require.NoError(t, decodeJSON(resp.Body, &out))
				assert.NotEmpty(t, out.ID)
				return
			}
			var body map[string]map[string]string
			require.NoError(t, decodeJSON(resp.Body, &body))
			assert.Equal(t, tt.code, body["error"]["code"])
			assert.NotEmpty(t, body["error"]["msg"])
			assert.NotContains(t, body["error"]["msg"], string(jwtSecret))
		})
	}
}

// TestJWTClient: the same rules through the Go client.
func TestJWTClient(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t, 0, nil)
	ctx := context.Background()
	hour := time.Now().Add(time.Hour)
	c := e.client(&wsclient.Options{Token: mint(t, "alice", hour, "publish:a.*"), DisableReconnect: true})

	_, err := c.Publish(ctx, "a.b", []byte(`1`))
	require.NoError(t, err)
	_, err = c.Publish(ctx, "b.c", []byte(`1`))
	assert.ErrorIs(t, err, wsproto.ErrForbidden)
	_, err = c.Subscribe(ctx, "a.b", "g", func(context.Context, *wsclient.Message) error { return nil })
	assert.ErrorIs(t, err, wsproto.ErrForbidden)

	_, err = wsclient.Dial(ctx, e.url, &wsclient.Options{Token: mint(t, "alice", time.Now().Add(-time.Minute))})
	assert.ErrorIs(t, err, wsproto.ErrTokenExpired)
	_, err = wsclient.Dial(ctx, e.url, &wsclient.Options{Token: "nope"})
	assert.ErrorIs(t, err, wsproto.ErrAuthFailed)

	// Another subject is refused; alice's policy stays.
	assert.ErrorIs(t, c.Auth(ctx, mint(t, "bob", hour, "publish:**")), wsproto.ErrAuthFailed)
	_, err = c.Publish(ctx, "b.c", []byte(`1`))
	assert.ErrorIs(t, err, wsproto.ErrForbidden)
}

// TestJWTClientRefresh: Client.Auth before expiry keeps the connection
// (DisableReconnect: a close would be final) and its subscription; a
// token that no longer allows the subscription ends it with wsproto.ErrForbidden.
func TestJWTClientRefresh(t *testing.T) {
	t.Parallel()
	e, clk := fakeJWTEnv(t)
	ctx := context.Background()
	scopes := []string{"subscribe:a.**", "publish:a.**"}
	c := e.client(&wsclient.Options{Token: mint(t, "alice", clk.Now().Add(time.Second), scopes...), DisableReconnect: true})
	got := make(chan string, 10)
	sub, err := c.Subscribe(ctx, "a.b", "g", func(_ context.Context, m *wsclient.Message) error {
		got <- string(m.Payload)
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, c.Auth(ctx, mint(t, "alice", clk.Now().Add(time.Hour), scopes...)))

	clk.Advance(2 * time.Second) // past the first token's expiry
	_, err = c.Publish(ctx, "a.b", []byte(`"kept"`))
	require.NoError(t, err, "the connection outlived the first token")
	select {
	case p := <-got:
		assert.Equal(t, `"kept"`, p)
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription did not outlive the first token")
	}

	require.NoError(t, c.Auth(ctx, mint(t, "alice", clk.Now().Add(time.Hour), "publish:a.**")))
	select {
	case <-sub.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription was not ended")
	}
	assert.ErrorIs(t, sub.Err(), wsproto.ErrForbidden)
	_, err = c.Publish(ctx, "a.b", []byte(`"still connected"`))
	require.NoError(t, err)
}

// TestJWTClientExpiry: a Go client whose token expires is cut off; with
// TokenFunc it reconnects with a fresh token and its subscription goes on.
func TestJWTClientExpiry(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t, 0, nil)
	ctx := context.Background()
	scopes := []string{"subscribe:a.**", "publish:a.**"}

	once := e.client(&wsclient.Options{Token: mint(t, "alice", time.Now().Add(500*time.Millisecond), scopes...), DisableReconnect: true})
	require.Eventually(t, func() bool {
		_, err := once.Publish(ctx, "a.b", []byte(`1`))
		return errors.Is(err, wsclient.ErrDisconnected)
	}, 5*time.Second, 20*time.Millisecond)

	var calls atomic.Int32
	c := e.client(&wsclient.Options{
		TokenFunc: func(context.Context) (string, error) {
			if calls.Add(1) == 1 {
				return mint(t, "alice", time.Now().Add(500*time.Millisecond), scopes...), nil
			}
			return mint(t, "alice", time.Now().Add(time.Hour), scopes...), nil
		},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	})
	got := make(chan string, 10)
	_, err := c.Subscribe(ctx, "a.b", "g", func(_ context.Context, m *wsclient.Message) error {
		got <- string(m.Payload)
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return calls.Load() >= 2 }, 5*time.Second, 10*time.Millisecond, "reconnected after 4401")
	_, err = c.Publish(ctx, "a.b", []byte(`"after reconnect"`))
	require.NoError(t, err)
	for {
		select {
		case p := <-got:
			if p == `"after reconnect"` {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the subscription did not go on after the reconnect")
		}
	}
}

// TestHTTPPublishOrder: HTTP publish answers 401 (no or bad token) before
// 400 (bad topic or query) before 403 (not allowed on that topic); the
// body is read only once the publish is allowed.
func TestHTTPPublishOrder(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t, 0, nil)
	good := mint(t, "alice", time.Now().Add(time.Hour), "publish:a.*")
	tests := []struct {
		name, path, token, body string
		status                  int
		code                    wsproto.Code
	}{
		{"no token, bad topic", "/publish/a..b", "", `1`, 401, wsproto.CodeUnauthorized},
		{"no token, bad query", "/publish/a.b?ts=yesterday", "", `1`, 401, wsproto.CodeUnauthorized},
		{"bad token, bad topic", "/publish/a..b", "x.y.z", `1`, 401, wsproto.CodeAuthFailed},
		{"bad topic, forbidden", "/publish/b..c", good, `1`, 400, wsproto.CodeBadFrame},
		{"bad query, forbidden topic", "/publish/b.c?ts=yesterday", good, `1`, 400, wsproto.CodeBadFrame},
		{"forbidden topic, bad body", "/publish/b.c", good, `{"n":`, 403, wsproto.CodeForbidden},
		{"allowed topic, bad body", "/publish/a.b", good, `{"n":`, 400, wsproto.CodeBadJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := newRequest(e.srv.URL+tt.path, tt.token, tt.body)
			require.NoError(t, err)
			resp, err := e.srv.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var body httpx.ErrorBody
			require.NoError(t, decodeJSON(resp.Body, &body))
			assert.Equal(t, tt.status, resp.StatusCode)
			assert.Equal(t, string(tt.code), body.Error.Code)
		})
	}
}
