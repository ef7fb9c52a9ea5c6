package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/ws/wsclient"
)

const testSecret = "0123456789abcdef0123456789abcdef" // 32 bytes

// jwtHubEnv is the environment of a hub in JWT mode.
var jwtHubEnv = map[string]string{
	"JWT_SECRET": testSecret,
	"JWT_AUD":    "promlib, other",
	"JWT_ISS":    "https://issuer.example",
}

// mintHub signs a token as the hub's issuer would.
func mintHub(t *testing.T, sub, aud string, exp time.Time, scope string) string {
	t.Helper()
	tok, err := jwt.NewBuilder().Subject(sub).Audience([]string{aud}).Issuer("https://issuer.example").
		Expiration(exp).Claim("scope", scope).Build()
	require.NoError(t, err)
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.HS256, []byte(testSecret)))
	require.NoError(t, err)
	return string(signed)
}

// httpPublish posts body to /publish/topic with the token and returns the
// status and the decoded answer.
func httpPublish(t *testing.T, addr, topic, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish/"+topic, strings.NewReader(`{"n":1}`))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// TestHubJWT: with JWT_SECRET, JWT_AUD and JWT_ISS the hub authenticates
// AUTH and HTTP publish with JWTs and applies their scopes.
func TestHubJWT(t *testing.T) {
	addr, logs := startHub(t, jwtHubEnv)
	assert.Contains(t, logs.String(), "auth: JWT")
	assert.NotContains(t, logs.String(), testSecret)
	assert.NotContains(t, logs.String(), "accepts ANY client")
	ctx := context.Background()
	hour := time.Now().Add(time.Hour)
	token := mintHub(t, "svc-a", "promlib", hour, "publish:a.* subscribe:a.**")

	c, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: token, DisableReconnect: true})
	require.NoError(t, err)
	defer c.Close()
	got := make(chan string, 1)
	_, err = c.Subscribe(ctx, "a.b", "g", func(_ context.Context, m *wsclient.Message) error {
		got <- string(m.Payload)
		return nil
	})
	require.NoError(t, err)
	_, err = c.Publish(ctx, "b.c", []byte(`1`))
	assert.ErrorIs(t, err, wsproto.ErrForbidden)
	_, err = c.Subscribe(ctx, "b.c", "g", func(context.Context, *wsclient.Message) error { return nil })
	assert.ErrorIs(t, err, wsproto.ErrForbidden)

	status, out := httpPublish(t, addr, "a.b", token)
	require.Equal(t, http.StatusOK, status, "%v", out)
	select {
	case p := <-got:
		assert.JSONEq(t, `{"n":1}`, p)
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery")
	}

	for _, tt := range []struct {
		name, topic, token string
		status             int
		code               string
	}{
		{"no token", "a.b", "", 401, "unauthorized"},
		{"wrong audience", "a.b", mintHub(t, "svc-a", "elsewhere", hour, "publish:a.*"), 401, "auth_failed"},
		{"expired", "a.b", mintHub(t, "svc-a", "promlib", time.Now().Add(-time.Minute), "publish:a.*"), 401, "token_expired"},
		{"forbidden", "b.c", token, 403, "forbidden"},
		{"second audience", "a.c", mintHub(t, "svc-a", "other", hour, "publish:a.*"), 200, ""},
	} {
		status, out := httpPublish(t, addr, tt.topic, tt.token)
		assert.Equal(t, tt.status, status, tt.name)
		if tt.code != "" {
			e, _ := out["error"].(map[string]any)
			assert.Equal(t, tt.code, e["code"], "%s: %v", tt.name, out)
		}
	}

	_, err = wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: mintHub(t, "svc-a", "elsewhere", hour, "publish:a.*")})
	assert.ErrorIs(t, err, wsproto.ErrAuthFailed)
	_, err = wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: testSecret})
	assert.ErrorIs(t, err, wsproto.ErrAuthFailed, "the secret is no static token")
}

// TestHubAuthConfig: bad or conflicting authentication settings stop the
// hub with an error naming the variables.
func TestHubAuthConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"JWT and WS_TOKEN", map[string]string{"JWT_SECRET": testSecret, "WS_TOKEN": "t"}, []string{"WS_TOKEN", "JWT_SECRET", "not both"}},
		{"JWKS and WS_TOKEN", map[string]string{"JWT_JWKS_URL": "https://issuer.example/jwks", "WS_TOKEN": "t"}, []string{"WS_TOKEN", "JWT_JWKS_URL"}},
		{"audience without key", map[string]string{"JWT_AUD": "promlib"}, []string{"JWT_SECRET or JWT_JWKS_URL"}},
		{"short secret", map[string]string{"JWT_SECRET": "short"}, []string{"JWT_SECRET", "Secrets[0].Key", "at least 32"}},
		{"plain http JWKS", map[string]string{"JWT_JWKS_URL": "http://issuer.example/jwks"}, []string{"JWT_JWKS_URL", "https"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-store", "memory"}, func(k string) string { return tt.env[k] }, io.Discard, nil)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// TestHubVerifier: in every mode the hub has one auth.Verifier, the
// gateway's, which an HTTP endpoint takes behind auth.Middleware.
func TestHubVerifier(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	hour := time.Now().Add(time.Hour)
	replay := func(a *hubAuth) http.Handler {
		return auth.Middleware(a.verifier)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := auth.Authorize(r.Context(), acl.Replay, r.PathValue("topic"), ""); err != nil {
				auth.WriteError(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
	}
	get := func(h http.Handler, topic, token string) int {
		mux := http.NewServeMux()
		mux.Handle("GET /replay/{topic}", h)
		req := httptest.NewRequest(http.MethodGet, "/replay/"+topic, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w.Code
	}

	a, err := setupAuth(func(k string) string { return jwtHubEnv[k] }, 0, log)
	require.NoError(t, err)
	defer a.close()
	assert.Equal(t, modeJWT, a.mode)
	h := replay(a)
	token := mintHub(t, "svc-a", "promlib", hour, "replay:a.**")
	assert.Equal(t, http.StatusNoContent, get(h, "a.b", token))
	assert.Equal(t, http.StatusForbidden, get(h, "b.c", token))
	assert.Equal(t, http.StatusUnauthorized, get(h, "a.b", ""))

	a, err = setupAuth(func(k string) string { return map[string]string{"WS_TOKEN": "tok"}[k] }, 0, log)
	require.NoError(t, err)
	assert.Equal(t, modeStatic, a.mode)
	h = replay(a)
	assert.Equal(t, http.StatusNoContent, get(h, "b.c", "tok"))
	assert.Equal(t, http.StatusUnauthorized, get(h, "b.c", "nope"))
	assert.Equal(t, http.StatusUnauthorized, get(h, "b.c", ""))

	a, err = setupAuth(func(string) string { return "" }, 0, log)
	require.NoError(t, err)
	assert.Equal(t, modeOpen, a.mode)
	assert.Equal(t, http.StatusNoContent, get(replay(a), "b.c", "anything"))
}
