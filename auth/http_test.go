package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/internal/httpx"
)

func TestBearerToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers []string
		want    string
		wantErr error
	}{
		{name: "bearer", headers: []string{"Bearer abc.def.ghi"}, want: "abc.def.ghi"},
		{name: "lower case scheme", headers: []string{"bearer abc"}, want: "abc"},
		{name: "extra spaces", headers: []string{"  Bearer   abc  "}, want: "abc"},
		{name: "none", wantErr: auth.ErrNoToken},
		{name: "basic", headers: []string{"Basic dXNlcjpwdw=="}, wantErr: auth.ErrNoToken},
		{name: "empty token", headers: []string{"Bearer "}, wantErr: auth.ErrNoToken},
		{name: "scheme only", headers: []string{"Bearer"}, wantErr: auth.ErrNoToken},
		{name: "two headers", headers: []string{"Bearer a", "Bearer b"}, wantErr: auth.ErrNoToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, h := range tt.headers {
				r.Header.Add("Authorization", h)
			}
			got, err := auth.BearerToken(r)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// A publish-like endpoint behind the middleware: 401 without a valid token,
// 403 for a topic the policy refuses, 200 otherwise.
func TestMiddleware(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, staticConfig())
	h := auth.Middleware(v)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		topic := r.URL.Query().Get("topic")
		if err := auth.Authorize(r.Context(), acl.Publish, topic, ""); err != nil {
			auth.WriteError(w, err)
			return
		}
		p, _ := auth.PrincipalFromContext(r.Context())
		_, _ = fmt.Fprintf(w, "ok %s", p.Subject)
	}))
	good := sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"scopes": []string{"publish:a.*"}}))
	expired := sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"exp": t0.Add(-time.Hour).Unix()}))

	tests := []struct {
		name       string
		auth       string
		topic      string
		wantStatus int
		wantCode   string
		wantChall  string
	}{
		{name: "allowed", auth: "Bearer " + good, topic: "a.b", wantStatus: http.StatusOK},
		{name: "forbidden topic", auth: "Bearer " + good, topic: "b.c", wantStatus: http.StatusForbidden, wantCode: auth.CodeForbidden},
		{name: "bad topic", auth: "Bearer " + good, topic: "a..b", wantStatus: http.StatusBadRequest, wantCode: auth.CodeBadRequest},
		{name: "no token", topic: "a.b", wantStatus: http.StatusUnauthorized, wantCode: auth.CodeUnauthorized, wantChall: "Bearer"},
		{name: "bad token", auth: "Bearer x.y.z", topic: "a.b", wantStatus: http.StatusUnauthorized, wantCode: auth.CodeAuthFailed, wantChall: `Bearer error="invalid_token"`},
		{name: "expired token", auth: "Bearer " + expired, topic: "a.b", wantStatus: http.StatusUnauthorized, wantCode: auth.CodeTokenExpired, wantChall: `Bearer error="invalid_token"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/publish?topic="+tt.topic, nil)
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			if tt.wantStatus == http.StatusOK {
				assert.Equal(t, "ok svc-a", w.Body.String())
				return
			}
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			assert.Equal(t, tt.wantChall, w.Header().Get("WWW-Authenticate"))
			var body httpx.ErrorBody
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
			assert.Equal(t, tt.wantCode, body.Error.Code)
			assert.NotEmpty(t, body.Error.Msg)
		})
	}
}

func TestWriteErrorHidesInternals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
		wantMsg    string
	}{
		{name: "keys unavailable", err: fmt.Errorf("%w: GET https://10.0.0.7/jwks: dial tcp: refused", auth.ErrKeysUnavailable), wantStatus: 503, wantCode: auth.CodeAuthUnavailable, wantMsg: "authentication is unavailable; try again later"},
		{name: "closed", err: auth.ErrClosed, wantStatus: 503, wantCode: auth.CodeAuthUnavailable, wantMsg: "authentication is unavailable; try again later"},
		{name: "other", err: errors.New("db password is hunter2"), wantStatus: 500, wantCode: auth.CodeInternal, wantMsg: "internal error"},
		{name: "canceled", err: context.Canceled, wantStatus: 500, wantCode: auth.CodeInternal, wantMsg: "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			auth.WriteError(w, tt.err)
			assert.Equal(t, tt.wantStatus, w.Code)
			assert.JSONEq(t, fmt.Sprintf(`{"error":{"code":%q,"msg":%q}}`, tt.wantCode, tt.wantMsg), w.Body.String())
		})
	}
}

func TestAuthorizeWithoutPrincipal(t *testing.T) {
	t.Parallel()
	err := auth.Authorize(context.Background(), acl.Publish, "a", "")
	require.ErrorIs(t, err, auth.ErrNoToken)
	status, code := auth.ErrorStatus(err)
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, auth.CodeUnauthorized, code)
}

// Middleware takes any Verifier: here a hand-written static token mode.
func TestMiddlewareStaticVerifier(t *testing.T) {
	t.Parallel()
	static := auth.VerifierFunc(func(_ context.Context, token string) (*auth.Principal, error) {
		if token != "let-me-in" {
			return nil, &auth.TokenError{Reason: auth.ErrSignature, Detail: "unknown token"}
		}
		return &auth.Principal{Subject: "static", Policy: acl.AllowEverything()}, nil
	})
	h := auth.Middleware(static)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := auth.Authorize(r.Context(), acl.Replay, "any.topic", ""); err != nil {
			auth.WriteError(w, err)
		}
	}))
	for tok, want := range map[string]int{"let-me-in": 200, "nope": 401} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, want, w.Code, tok)
	}
}

// StaticTokens and OpenAccess are Verifiers like the JWT one: their
// principals may do everything; a nil Verifier is open access.
func TestStaticTokensAndOpenAccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	static := auth.StaticTokens("s3cret", "")
	p, err := static.Verify(ctx, "s3cret")
	require.NoError(t, err)
	assert.Equal(t, "static", p.Subject)
	assert.True(t, p.Expiry.IsZero())
	assert.NoError(t, p.Check(acl.Admin, "any.topic", ""))
	for _, tok := range []string{"", "nope", "s3cre"} {
		_, err = static.Verify(ctx, tok)
		assert.ErrorIs(t, err, auth.ErrInvalidToken, tok)
		assert.ErrorIs(t, err, auth.ErrUnknownToken, tok)
	}
	_, err = auth.StaticTokens().Verify(ctx, "")
	assert.ErrorIs(t, err, auth.ErrUnknownToken, "no tokens: nothing is accepted")

	p, err = auth.OpenAccess().Verify(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, "anonymous", p.Subject)
	assert.NoError(t, p.Check(acl.Publish, "a", ""))

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r2, p, err := auth.Authenticate(nil, r)
	require.NoError(t, err, "nil verifier: open access")
	assert.NoError(t, p.Check(acl.Replay, "a", ""))
	inCtx, ok := auth.PrincipalFromContext(r2.Context())
	require.True(t, ok, "the returned request carries the principal")
	assert.Same(t, p, inCtx)
	_, _, err = auth.Authenticate(static, r)
	assert.ErrorIs(t, err, auth.ErrNoToken, "refused without a token: the token is missing")
	r.Header.Set("Authorization", "Bearer nope")
	_, _, err = auth.Authenticate(static, r)
	assert.ErrorIs(t, err, auth.ErrUnknownToken)
	// A principal in the context already (a Middleware in front) is used
	// as it is: the bad token is not verified again.
	_, got, err := auth.Authenticate(static, r.WithContext(auth.NewContext(ctx, p)))
	require.NoError(t, err)
	assert.Same(t, p, got)
}
