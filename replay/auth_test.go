package replay_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/replay"
)

var testSecret = []byte("a test secret of 32 bytes, no more")

// token signs an HS256 JWT with scopes that expires at exp.
func token(t testing.TB, secret []byte, exp time.Time, scopes ...string) string {
	t.Helper()
	tok, err := jwt.NewBuilder().Subject("svc").Expiration(exp).Claim("scope", scopes).Build()
	require.NoError(t, err)
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.HS256, secret))
	require.NoError(t, err)
	return "Bearer " + string(signed)
}

func newVerifier(t testing.TB) *auth.JWTVerifier {
	t.Helper()
	v, err := auth.NewJWTVerifier(auth.Config{Secrets: []auth.Secret{{Key: testSecret}}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, v.Close()) })
	return v
}

func TestAuthorization(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	fill(t, bus, "orders.eu", 3, sameTS(1), func(int) string { return "k" })
	fill(t, bus, "payments", 3, sameTS(1), nil)
	v := newVerifier(t)
	hour := time.Now().Add(time.Hour)

	// The handler verifying tokens itself, and a host that runs
	// auth.Middleware in front of it.
	own := newHandler(t, store, replay.Config{Verifier: v})
	host := auth.Middleware(v)(newHandler(t, store, replay.Config{}))

	tests := []struct {
		name       string
		auth       string // Authorization header; "" for none
		badQuery   bool   // add a bad parameter
		topic      string // default orders.eu
		wantStatus int
		wantCode   string
	}{
		{"no token", "", false, "", http.StatusUnauthorized, auth.CodeUnauthorized},
		{"not bearer", "Basic dXNlcjpwdw==", false, "", http.StatusUnauthorized, auth.CodeUnauthorized},
		{"garbage token", "Bearer not.a.jwt", false, "", http.StatusUnauthorized, auth.CodeAuthFailed},
		{"other secret", token(t, []byte("another secret of 32 bytes, or so"), hour, "replay:**"), false, "", http.StatusUnauthorized, auth.CodeAuthFailed},
		{"expired", token(t, testSecret, time.Now().Add(-time.Minute), "replay:**"), false, "", http.StatusUnauthorized, auth.CodeTokenExpired},
		{"no token, bad parameters: 401 first", "", true, "", http.StatusUnauthorized, auth.CodeUnauthorized},
		{"subscribe scope only", token(t, testSecret, hour, "subscribe:orders.**"), false, "", http.StatusForbidden, auth.CodeForbidden},
		{"replay of another topic", token(t, testSecret, hour, "replay:orders.**"), false, "payments", http.StatusForbidden, auth.CodeForbidden},
		{"one segment pattern", token(t, testSecret, hour, "replay:*"), false, "", http.StatusForbidden, auth.CodeForbidden},
		{"no scopes", token(t, testSecret, hour), false, "", http.StatusForbidden, auth.CodeForbidden},
		{"forbidden, bad parameters: 400 (parameters before policy)", token(t, testSecret, hour, "subscribe:orders.**"), true, "", http.StatusBadRequest, replay.CodeBadRequest},
		{"allowed, bad parameters: 400", token(t, testSecret, hour, "replay:orders.**"), true, "", http.StatusBadRequest, replay.CodeBadRequest},
		{"allowed", token(t, testSecret, hour, "replay:orders.**"), false, "", http.StatusOK, ""},
		{"allowed by a one segment pattern", token(t, testSecret, hour, "replay:orders.*"), false, "", http.StatusOK, ""},
		{"allowed everything", token(t, testSecret, hour, "replay:**"), false, "payments", http.StatusOK, ""},
	}
	for _, tt := range tests {
		topic := tt.topic
		if topic == "" {
			topic = "orders.eu"
		}
		for _, ep := range []string{"replay", "export", "latest"} {
			query := "topic=" + topic
			if tt.badQuery {
				query += "&limit=0"
				if ep == "export" {
					query = "topic=" + topic + "&fromTs=2&toTs=1"
				}
			}
			for name, h := range map[string]http.Handler{"own": own, "host": host} {
				t.Run(fmt.Sprintf("%s/%s/%s", tt.name, ep, name), func(t *testing.T) {
					t.Parallel()
					var hdr []string
					if tt.auth != "" {
						hdr = []string{"Authorization", tt.auth}
					}
					rec := get(t, h, "/"+ep+"?"+query, hdr...)
					if tt.wantStatus == http.StatusOK {
						assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
						return
					}
					e := errorOf(t, rec, tt.wantStatus)
					assert.Equal(t, tt.wantCode, e.Code)
					if tt.wantStatus == http.StatusUnauthorized {
						assert.Contains(t, rec.Header().Get("WWW-Authenticate"), "Bearer")
					}
				})
			}
		}
	}
}

// Any auth.Verifier will do: its principal's policy decides, and a verifier
// that fails is a 500 that tells the client nothing.
func TestOtherVerifier(t *testing.T) {
	t.Parallel()
	_, store := newBus(t)
	policy, err := acl.NewPolicy(
		acl.Rule{Effect: acl.Allow, Action: acl.Replay, Topics: []string{"**"}},
		acl.Rule{Effect: acl.Deny, Action: acl.Replay, Topics: []string{"secret"}},
	)
	require.NoError(t, err)
	var asked []string
	v := auth.VerifierFunc(func(_ context.Context, token string) (*auth.Principal, error) {
		asked = append(asked, token)
		if token == "broken" {
			return nil, errors.New("policy service down")
		}
		return &auth.Principal{Subject: token, Policy: policy}, nil
	})
	h := newHandler(t, store, replay.Config{Verifier: v})
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	assert.Equal(t, http.StatusOK, get(t, h, "/replay?topic=open", bearer("a")...).Code)
	e := errorOf(t, get(t, h, "/export?topic=secret", bearer("b")...), http.StatusForbidden)
	assert.Equal(t, auth.CodeForbidden, e.Code)
	e = errorOf(t, get(t, h, "/latest?topic=open", bearer("broken")...), http.StatusInternalServerError)
	assert.Equal(t, auth.CodeInternal, e.Code)
	assert.NotContains(t, e.Msg, "policy service")
	// Bad parameters are answered before the policy is asked.
	errorOf(t, get(t, h, "/replay?topic=secret&limit=0", bearer("c")...), http.StatusBadRequest)
	assert.Equal(t, []string{"a", "b", "broken", "c"}, asked)
}
