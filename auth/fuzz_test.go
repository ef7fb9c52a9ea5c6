package auth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/auth"
)

// FuzzVerify: Verify never panics, and every error for a token is a token
// error.
func FuzzVerify(f *testing.F) {
	cfg := staticConfig()
	cfg.MaxTokenSize = 1 << 16
	v, err := auth.NewJWTVerifier(cfg)
	require.NoError(f, err)
	f.Cleanup(func() { _ = v.Close() })

	valid := sign(f, auth.HS256, hmacSecret, "hs", claims(nil))
	for _, s := range []string{
		valid,
		sign(f, auth.RS256, rsaKey(), "rsa", claims(nil)),
		sign(f, auth.ES256, ecKey(), "", claims(map[string]any{"scopes": "publish:a.* subscribe:**"})),
		rawToken(f, map[string]any{"alg": "none"}, claims(nil), ""),
		strings.Replace(valid, ".", "..", 1),
		valid[:len(valid)-3],
		"", ".", "..", "...", "a.b.c", "e30.e30.e30", "eyJhbGciOiJIUzI1NiJ9.bnVsbA.AAAA",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		p, err := v.Verify(context.Background(), token)
		if err != nil {
			require.ErrorIs(t, err, auth.ErrInvalidToken)
			require.Nil(t, p)
			return
		}
		require.NotNil(t, p)
		require.NotNil(t, p.Policy)
	})
}

// FuzzClaims signs arbitrary payloads, so that the claims checks (after the
// signature) get fuzzed too.
func FuzzClaims(f *testing.F) {
	v, err := auth.NewJWTVerifier(staticConfig())
	require.NoError(f, err)
	f.Cleanup(func() { _ = v.Close() })
	for _, s := range []string{
		`{}`, `null`, `[]`, `"x"`, `{"exp":1e999}`, `{"exp":-1}`, `{"exp":"1"}`,
		`{"exp":1893456000,"aud":"promlib","iss":"https://issuer.example"}`,
		`{"exp":1893456000,"aud":["promlib"],"iss":"https://issuer.example","scope":"publish:a.* x"}`,
		`{"exp":1893456000,"aud":"promlib","iss":"https://issuer.example","policy":{"rules":[{"effect":"allow","action":"*","topics":["**"]}]}}`,
		`{"exp":1893456000,"aud":"promlib","iss":"https://issuer.example","policy":"{\"rules\":[]}"}`,
		`{"exp":1893456000,"aud":"promlib","iss":"https://issuer.example","policy":7}`,
		`{"exp":1893456000,"nbf":1e20,"aud":"promlib","iss":"https://issuer.example"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		tok := signRaw(t, payload)
		p, err := v.Verify(context.Background(), tok)
		if err != nil {
			require.ErrorIs(t, err, auth.ErrInvalidToken)
			require.Nil(t, p)
			return
		}
		require.NotNil(t, p.Policy)
		require.False(t, p.Expiry.IsZero())
	})
}
