package ops_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

func TestBadInput(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus, Topics: []string{"orders"}})
	long := strings.Repeat("k", 1025)
	tests := []struct {
		name, method, target, body string
		status                     int
		code                       string
		names                      string // the message names it
	}{
		{"lag without topic", "GET", "/ops/lag?group=g", "", 400, "bad_request", "topic"},
		{"lag without group", "GET", "/ops/lag?topic=orders", "", 400, "bad_request", "group"},
		{"empty topic", "GET", "/ops/lag?topic=&group=g", "", 400, "bad_request", "topic"},
		{"bad topic", "GET", "/ops/lag?topic=a%20b&group=g", "", 400, "bad_request", "topic"},
		{"pattern topic", "GET", "/ops/cursors?topic=a.*", "", 400, "bad_request", "topic"},
		{"bad group", "GET", "/ops/lag?topic=orders&group=g..h", "", 400, "bad_request", "group"},
		{"unknown parameter", "GET", "/ops/lag?topic=orders&group=g&grp=h", "", 400, "bad_request", "grp"},
		{"repeated parameter", "GET", "/ops/lag?topic=orders&topic=x&group=g", "", 400, "bad_request", "topic"},
		{"bad query", "GET", "/ops/topics?topic=%zz", "", 400, "bad_request", "query"},
		{"cursors without topic", "GET", "/ops/cursors", "", 400, "bad_request", "topic"},
		{"latest without key", "GET", "/ops/latest?topic=orders", "", 400, "bad_request", "key"},
		{"latest empty key", "GET", "/ops/latest?topic=orders&key=", "", 400, "bad_request", "key"},
		{"latest long key", "GET", "/ops/latest?topic=orders&key=" + long, "", 400, "bad_request", "key"},
		{"dlq limit zero", "GET", "/ops/dlq?topic=orders&group=g&limit=0", "", 400, "bad_request", "limit"},
		{"dlq limit too big", "GET", "/ops/dlq?topic=orders&group=g&limit=1001", "", 400, "bad_request", "limit"},
		{"dlq limit not a number", "GET", "/ops/dlq?topic=orders&group=g&limit=ten", "", 400, "bad_request", "limit"},
		{"dlq after negative", "GET", "/ops/dlq?topic=orders&group=g&after=-1", "", 400, "bad_request", "after"},
		{"redrive without topic", "POST", "/ops/dlq/redrive", "", 400, "bad_request", "topic"},
		{"redrive body not JSON", "POST", "/ops/dlq/redrive", "topic=orders", 400, "bad_request", "body"},
		{"redrive topic not a string", "POST", "/ops/dlq/redrive", `{"topic":true}`, 400, "bad_request", "topic"},
		{"redrive topic twice", "POST", "/ops/dlq/redrive?topic=orders", `{"topic":"orders"}`, 400, "bad_request", "topic"},
		{"redrive unknown field", "POST", "/ops/dlq/redrive", `{"topic":"orders","group":"g","max":3}`, 400, "bad_request", "max"},
		{"redrive limit negative", "POST", "/ops/dlq/redrive", `{"topic":"orders","group":"g","limit":-1}`, 400, "bad_request", "limit"},
		{"redrive with GET", "GET", "/ops/dlq/redrive?topic=orders", "", 405, "method_not_allowed", "POST"},
		{"topics with POST", "POST", "/ops/topics", "", 405, "method_not_allowed", "GET"},
		{"unknown path", "GET", "/ops/nothing", "", 404, "not_found", "/ops/nothing"},
		{"outside the prefix", "GET", "/other", "", 404, "not_found", "/other"},
		{"group without cursor", "GET", "/ops/lag?topic=orders&group=nobody", "", 404, "not_found", "nobody"},
		{"latest without a key store", "GET", "/ops/latest?topic=orders&key=k", "", 404, "not_found", "k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(t, h, tt.method, tt.target, tt.body)
			require.Equal(t, tt.status, w.Code, w.Body.String())
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			var b errorBody
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b), w.Body.String())
			assert.Equal(t, tt.code, b.Error.Code)
			assert.Contains(t, b.Error.Msg, tt.names)
		})
	}
}

// A store without KeyStore gets 501 for /ops/latest.
type plainStore struct{ event.Store }

func TestLatest(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus})
	ctx := context.Background()
	for _, v := range []string{`1`, `2`} {
		_, err := bus.Publish(ctx, "state", []byte(v), event.WithKey("host:a"))
		require.NoError(t, err)
	}
	var got ops.LatestResponse
	getJSON(t, h, "/ops/latest?topic=state&key=host:a", &got)
	assert.Equal(t, "host:a", got.Key)
	assert.Equal(t, uint64(2), got.Record.Seq)
	assert.JSONEq(t, `2`, string(got.Record.Payload))

	w := do(t, h, "GET", "/ops/latest?topic=state&key=host:b", "")
	assert.Equal(t, http.StatusNotFound, w.Code)

	ms := event.NewMemoryStore()
	plain, err := event.NewBus(plainStore{ms}, event.Config{Cursors: ms})
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close(ctx) })
	w = do(t, newHandler(t, ops.Config{Bus: plain}), "GET", "/ops/latest?topic=state&key=host:a", "")
	assert.Equal(t, http.StatusNotImplemented, w.Code)
	assert.Contains(t, w.Body.String(), `"not_supported"`)
}

// testVerifier accepts the tokens of scopes and gives a principal with
// those scopes as its policy; any other token is refused, and "broken"
// fails as a verifier that cannot answer.
func testVerifier(t *testing.T, scopes map[string][]string) auth.Verifier {
	t.Helper()
	return auth.VerifierFunc(func(_ context.Context, token string) (*auth.Principal, error) {
		if token == "broken" {
			return nil, errors.New("policy service down")
		}
		s, ok := scopes[token]
		if !ok {
			return nil, &auth.TokenError{Reason: auth.ErrUnknownToken}
		}
		p, err := acl.FromScopes(s)
		require.NoError(t, err)
		return &auth.Principal{Subject: token, Policy: p}, nil
	})
}

// The reads need inspect on the topic they name, redrive needs admin, the
// listings a valid token only; the page is served to anyone.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus, Verifier: testVerifier(t, map[string][]string{
		"t":      {"inspect:orders", "inspect:dlqs.**", "admin:orders"},
		"reader": {"inspect:**", "replay:**", "publish:**"},
	})})
	r := func(method, target, token string) (int, string) {
		req, _ := http.NewRequest(method, target, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := newRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	code, body := r("GET", "/ops/dlq?topic=secret&group=g", "t")
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, `"forbidden"`)
	code, _ = r("GET", "/ops/lag?topic=orders&group=g", "t")
	assert.Equal(t, http.StatusNotFound, code, "authorized, then no cursor")
	code, _ = r("GET", "/ops/topics", "t")
	assert.Equal(t, http.StatusOK, code, "a listing needs a principal only")
	code, body = r("GET", "/ops/topics", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, `"unauthorized"`)
	code, body = r("GET", "/ops/topics", "broken")
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.NotContains(t, body, "policy service")
	code, _ = r("GET", "/ops/", "")
	assert.Equal(t, http.StatusOK, code, "the page holds no data")

	code, _ = r("POST", "/ops/dlq/redrive?topic=orders&group=g", "t")
	assert.Equal(t, http.StatusOK, code, "admin on orders")
	code, body = r("POST", "/ops/dlq/redrive?topic=orders&group=g", "reader")
	assert.Equal(t, http.StatusForbidden, code, "inspect, replay and publish do not redrive")
	assert.Contains(t, body, "admin")
	code, _ = r("GET", "/ops/dlq?topic=orders&group=g", "reader")
	assert.Equal(t, http.StatusOK, code)
}

// Every JSON endpoint answers 401 (no or bad token) before 400 (bad
// parameters) before 403 (not allowed on that topic).
func TestAuthOrder(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus, Verifier: testVerifier(t, map[string][]string{"t": {"inspect:orders"}})})
	tests := []struct {
		name, method, target, token string
		status                      int
		code                        string
	}{
		{"no token, bad parameters", "GET", "/ops/lag?topic=a%20b&group=g", "", 401, "unauthorized"},
		{"bad token, bad parameters", "GET", "/ops/lag?topic=a%20b&group=g", "nope", 401, "auth_failed"},
		{"no token, redrive without topic", "POST", "/ops/dlq/redrive", "", 401, "unauthorized"},
		{"bad parameters, forbidden topic", "GET", "/ops/dlq?topic=secret&group=g&limit=0", "t", 400, "bad_request"},
		{"unknown parameter, forbidden topic", "GET", "/ops/cursors?topic=secret&x=1", "t", 400, "bad_request"},
		{"redrive without topic", "POST", "/ops/dlq/redrive", "t", 400, "bad_request"},
		{"forbidden topic", "GET", "/ops/dlq?topic=secret&group=g", "t", 403, "forbidden"},
		{"forbidden redrive", "POST", "/ops/dlq/redrive?topic=orders&group=g", "t", 403, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, tt.target, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			w := newRecorder()
			h.ServeHTTP(w, req)
			require.Equal(t, tt.status, w.Code, w.Body.String())
			var b errorBody
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b), w.Body.String())
			assert.Equal(t, tt.code, b.Error.Code)
			if tt.status == http.StatusUnauthorized {
				assert.Contains(t, w.Header().Get("WWW-Authenticate"), "Bearer")
			}
		})
	}
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus, Prefix: "/admin/ops"})

	w := do(t, h, http.MethodGet, "/admin/ops?x=1", "")
	assert.Equal(t, http.StatusMovedPermanently, w.Code)
	assert.Equal(t, "/admin/ops/?x=1", w.Header().Get("Location"))

	w = do(t, h, http.MethodGet, "/admin/ops/", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	page := w.Body.String()
	for _, id := range ops.DashboardIDs {
		assert.Contains(t, page, `id="`+id+`"`)
	}
	assert.Contains(t, page, `data-state="loading"`)
	assert.Contains(t, page, `data-polls="0"`)
	for _, field := range []string{"head", "lag", "lag_ms", "in_flight", "committed", "dlq_pending"} {
		assert.Contains(t, page, `["`+field+`"`)
	}
	assert.Contains(t, page, fmt.Sprintf("var interval = %d;", ops.DashboardPollInterval))
	// Relative fetches, so the page works under any prefix.
	assert.Contains(t, page, `get("topics")`)
	assert.Contains(t, page, `get("inflight")`)
	// No external assets.
	for _, ext := range []string{"http://", "https://", "src=", "href="} {
		assert.NotContains(t, page, ext)
	}

	// The CSP allows exactly the inline style and script, by hash.
	csp := w.Header().Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "connect-src 'self'")
	for _, tag := range []string{"style", "script"} {
		inner := between(t, page, "<"+tag+">", "</"+tag+">")
		sum := sha256.Sum256([]byte(inner))
		assert.Contains(t, csp, tag+"-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
		assert.Equal(t, 1, strings.Count(page, "<"+tag))
	}

	w = do(t, h, http.MethodHead, "/admin/ops/", "")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Zero(t, w.Body.Len())
	w = do(t, h, http.MethodPost, "/admin/ops/", "")
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	w = do(t, h, http.MethodGet, "/ops/topics", "")
	assert.Equal(t, http.StatusNotFound, w.Code)
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	require.True(t, ok, "no %s", from)
	inner, _, ok := strings.Cut(rest, to)
	require.True(t, ok, "no %s", to)
	return inner
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	tests := []struct {
		name  string
		cfg   ops.Config
		field string
	}{
		{"no bus", ops.Config{}, "Bus"},
		{"bad topic", ops.Config{Bus: bus, Topics: []string{"a..b"}}, "Topics"},
		{"bad group", ops.Config{Bus: bus, Groups: map[string][]string{"a": {"*"}}}, "Groups"},
		{"bad prefix", ops.Config{Bus: bus, Prefix: "ops/"}, "Prefix"},
		{"peek over max", ops.Config{Bus: bus, PeekLimit: 50, MaxLimit: 10}, "PeekLimit"},
		{"negative max", ops.Config{Bus: bus, MaxLimit: -1}, "MaxLimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ops.NewHandler(tt.cfg)
			require.ErrorIs(t, err, ops.ErrInvalid)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
}

// Routing: 405 names the allowed methods in Allow; paths that are not
// exactly an endpoint's are 404, under the prefix or not.
func TestRouting(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ops.Config{Bus: newBus(t)})
	w := do(t, h, "POST", "/ops/topics", "")
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	w = do(t, h, "GET", "/ops/dlq/redrive", "")
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "POST", w.Header().Get("Allow"))
	w = do(t, h, "DELETE", "/ops/", "")
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	w = do(t, h, "HEAD", "/ops/topics", "")
	assert.Equal(t, http.StatusOK, w.Code)
	for _, p := range []string{"/ops//topics", "/ops/topics/", "/ops/x/../topics", "/opsx/topics", "/ops/dlq/"} {
		w = do(t, h, "GET", p, "")
		assert.Equal(t, http.StatusNotFound, w.Code, p)
		assert.Contains(t, w.Body.String(), `"not_found"`, p)
	}
}
