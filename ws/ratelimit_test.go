package ws

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hammer publishes to topic over rs until clk reaches until, in rounds:
// each connection sends a window of publishes and reads their answers,
// then clk moves on by step. The server always has attempts waiting, so
// no token goes unused. It counts the accepted and the rate-limited
// answers.
func hammer(t *testing.T, clk *clock.Fake, until time.Time, topic string, rs ...*raw) (ok, limited int) {
	t.Helper()
	const window, step = 32, 10 * time.Millisecond
	sent := 0
	for clk.Now().Before(until) {
		for _, r := range rs {
			for range window {
				r.send(fmt.Sprintf(`{"op":"PUBLISH","topic":%q,"payload":%d}`, topic, sent))
				sent++
			}
		}
		for _, r := range rs {
			for range window {
				f := r.recv()
				switch f.str("op") {
				case "OK":
					ok++
				case "ERR":
					require.Equal(t, string(wsproto.CodeRateLimited), f.str("code"))
					limited++
				}
			}
		}
		clk.Advance(step)
	}
	return ok, limited
}

// rateEnv is newEnv with the gateway on a fake clock, which the buckets
// tell the time by (the bus keeps the system clock: no lease is involved).
func rateEnv(t *testing.T, mod func(*Config)) (*testEnv, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Now())
	cfg := Config{Verifier: auth.StaticTokens(testToken), Clock: clk}
	mod(&cfg)
	return startEnv(t, cfg, nil), clk
}

// TestPublishRate: over a few seconds, the accepted publishes of a
// connection match the configured rate (plus the burst) within 10%.
func TestPublishRate(t *testing.T) {
	t.Parallel()
	const rate, burst = 100, 20
	e, clk := rateEnv(t, func(c *Config) {
		c.RateLimits.Publish = ratelimit.Limit{Rate: rate, Burst: burst}
	})
	r := e.authed()
	start := clk.Now()
	ok, limited := hammer(t, clk, start.Add(2*time.Second), "t", r)
	elapsed := clk.Now().Sub(start).Seconds()
	want := burst + rate*elapsed
	t.Logf("accepted %d, limited %d in %.2fs; want %.0f", ok, limited, elapsed, want)
	assert.Positive(t, limited, "the client went faster than the limit")
	assert.InEpsilon(t, want, float64(ok), 0.10)
}

// TestTopicPublishRate: the topic bucket is shared by all connections.
func TestTopicPublishRate(t *testing.T) {
	t.Parallel()
	const rate, burst = 100, 20
	e, clk := rateEnv(t, func(c *Config) {
		c.RateLimits.TopicPublish = ratelimit.Limit{Rate: rate, Burst: burst}
	})
	start := clk.Now()
	total, _ := hammer(t, clk, start.Add(2*time.Second), "shared", e.authed(), e.authed())
	elapsed := clk.Now().Sub(start).Seconds()
	want := burst + rate*elapsed
	t.Logf("accepted %d over two connections in %.2fs; want %.0f", total, elapsed, want)
	assert.InEpsilon(t, want, float64(total), 0.10)
	// Another topic has its own bucket.
	e.authed().publish("other", 1, "p")
}

// TestDeliverPacing: EVENT frames to a connection follow its delivery
// bucket; the events wait, none is dropped.
func TestDeliverPacing(t *testing.T) {
	t.Parallel()
	const rate, burst, n = 50, 5, 30
	e := newEnv(t, func(c *Config) {
		c.RateLimits.Deliver = ratelimit.Limit{Rate: rate, Burst: burst}
	})
	r := e.authed()
	r.subscribe("t", "g", "s", nil)
	for i := 0; i < n; i++ {
		_, err := e.bus.Publish(context.Background(), "t", []byte("1"))
		require.NoError(t, err)
	}
	start := time.Now()
	for i := 0; i < n; {
		f := r.recv()
		if f.str("op") == "OK" {
			continue // answer to an ACK
		}
		require.Equal(t, "EVENT", f.str("op"))
		r.send(ack("ACK", "t", "g", f.obj("event").str("id"), "a"))
		i++
		// Counted against elapsed time: never more than the bucket allows.
		allowed := burst + rate*time.Since(start).Seconds()
		require.LessOrEqual(t, float64(i), allowed+1)
	}
}

func TestHTTPPublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) {
		c.MaxPayload = 64
		c.RateLimits.TopicPublish = ratelimit.Limit{Rate: 0.001, Burst: 3}
	})
	post := func(path, token, body string) (int, map[string]any) {
		t.Helper()
		req, err := newRequest(e.srv.URL+path, token, body)
		require.NoError(t, err)
		resp, err := e.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		_ = decodeJSON(resp.Body, &out)
		if resp.StatusCode != 200 {
			// Every HTTP error is {"error":{"code","msg"}}.
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Len(t, out, 1, "%v", out)
			out, _ = out["error"].(map[string]any)
		}
		return resp.StatusCode, out
	}
	status, out := post("/publish/orders?key=k1&tag=a&tag=b", testToken, `{"n":1}`)
	require.Equal(t, 200, status, "%v", out)
	assert.NotEmpty(t, out["id"])
	assert.Equal(t, float64(1), out["seq"])
	rec, err := e.store.FindByID(context.Background(), "orders", out["id"].(string))
	require.NoError(t, err)
	assert.Equal(t, "k1", rec.Key)
	assert.Equal(t, []string{"a", "b"}, rec.Tags)

	tests := []struct {
		name, path, token, body string
		status                  int
		code                    wsproto.Code
	}{
		{"bad json", "/publish/orders", testToken, `{"n":`, 400, wsproto.CodeBadJSON},
		{"too large", "/publish/orders", testToken, `"` + string(make([]byte, 100)) + `"`, 413, wsproto.CodeTooLarge},
		{"no token", "/publish/orders", "", `1`, 401, wsproto.CodeUnauthorized},
		{"bad token", "/publish/orders", "nope", `1`, 401, wsproto.CodeAuthFailed},
		{"bad topic", "/publish/a..b", testToken, `1`, 400, wsproto.CodeBadFrame},
		{"bad ts", "/publish/orders?ts=yesterday", testToken, `1`, 400, wsproto.CodeBadFrame},
	}
	for _, tt := range tests {
		status, out := post(tt.path, tt.token, tt.body)
		assert.Equal(t, tt.status, status, tt.name)
		assert.Equal(t, string(tt.code), out["code"], tt.name)
		assert.NotEmpty(t, out["msg"], tt.name)
	}
	// The topic bucket (burst 3) is shared with WebSocket publishers.
	status, _ = post("/publish/orders", testToken, `2`)
	require.Equal(t, 200, status)
	r := e.authed()
	r.publish("orders", 3, "p")
	status, out = post("/publish/orders", testToken, `4`)
	assert.Equal(t, 429, status)
	assert.Equal(t, string(wsproto.CodeRateLimited), out["code"])

	w := httptest.NewRecorder()
	e.gw.PublishHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/publish/orders", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.JSONEq(t, `{"error":{"code":"bad_frame","msg":"method GET is not allowed: use POST"}}`, w.Body.String())
}
