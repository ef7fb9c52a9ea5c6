package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
)

// staticConfig accepts an HMAC secret (kid "hs"), an RSA key ("rsa"), an
// ECDSA key ("ec") and an Ed25519 key ("ed"), for audience "promlib" and
// issuer "https://issuer.example", with 30 s of leeway, at t0.
func staticConfig() auth.Config {
	return auth.Config{
		Secrets: []auth.Secret{{ID: "hs", Key: hmacSecret}},
		Keys: []auth.PublicKey{
			{ID: "rsa", Key: &rsaKey().PublicKey},
			{ID: "ec", Key: &ecKey().PublicKey},
			{ID: "ed", Key: edKey().Public()},
		},
		Audiences: []string{"promlib"},
		Issuers:   []string{"https://issuer.example"},
		Leeway:    30 * time.Second,
		Clock:     clock.NewFake(t0),
	}
}

func newVerifier(t *testing.T, cfg auth.Config) *auth.JWTVerifier {
	t.Helper()
	v, err := auth.NewJWTVerifier(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func TestVerifyAccepts(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, staticConfig())
	tests := []struct {
		name  string
		token string
	}{
		{name: "HS256 with kid", token: sign(t, auth.HS256, hmacSecret, "hs", claims(nil))},
		{name: "HS256 without kid", token: sign(t, auth.HS256, hmacSecret, "", claims(nil))},
		{name: "RS256", token: sign(t, auth.RS256, rsaKey(), "rsa", claims(nil))},
		{name: "RS256 without kid", token: sign(t, auth.RS256, rsaKey(), "", claims(nil))},
		{name: "ES256", token: sign(t, auth.ES256, ecKey(), "ec", claims(nil))},
		{name: "EdDSA", token: sign(t, auth.EdDSA, edKey(), "ed", claims(nil))},
		{name: "expired within leeway", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"exp": t0.Add(-29 * time.Second).Unix()}))},
		{name: "nbf within leeway", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"nbf": t0.Add(29 * time.Second).Unix()}))},
		{name: "nbf past", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"nbf": t0.Add(-time.Hour).Unix()}))},
		{name: "aud array", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"aud": []string{"other", "promlib"}}))},
		{name: "fractional exp", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"exp": float64(t0.Unix()) + 0.5}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := v.Verify(context.Background(), tt.token)
			require.NoError(t, err)
			assert.Equal(t, "svc-a", p.Subject)
			assert.NotNil(t, p.Policy)
		})
	}
}

// The negative matrix: every token is refused, with the reason named.
func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, staticConfig())
	rsaPEM := pemPublic(t, &rsaKey().PublicKey)
	valid := sign(t, auth.HS256, hmacSecret, "hs", claims(nil))
	parts := strings.Split(valid, ".")
	otherPayload := strings.Split(sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"sub": "admin"})), ".")[1]

	tests := []struct {
		name    string
		token   string
		wantErr error
		wantMsg string
	}{
		{name: "alg none", token: rawToken(t, map[string]any{"alg": "none"}, claims(nil), ""), wantErr: auth.ErrAlgorithm, wantMsg: `"none"`},
		{name: "alg None with a signature", token: rawToken(t, map[string]any{"alg": "None", "kid": "hs"}, claims(nil), parts[2]), wantErr: auth.ErrAlgorithm, wantMsg: "never accepted"},
		{name: "alg unknown", token: rawToken(t, map[string]any{"alg": "HS1"}, claims(nil), parts[2]), wantErr: auth.ErrAlgorithm, wantMsg: "not supported"},
		{name: "no alg", token: rawToken(t, map[string]any{"kid": "hs"}, claims(nil), parts[2]), wantErr: auth.ErrMalformed, wantMsg: "no alg"},
		{name: "HS256 signed with the RSA public key, kid of the RSA key", token: sign(t, auth.HS256, rsaPEM, "rsa", claims(nil)), wantErr: auth.ErrAlgorithm, wantMsg: `static key "rsa" (RS256)`},
		{name: "RS256 with the kid of the EC key", token: sign(t, auth.RS256, rsaKey(), "ec", claims(nil)), wantErr: auth.ErrAlgorithm},
		{name: "ES256 with the kid of the HMAC key", token: sign(t, auth.ES256, ecKey(), "hs", claims(nil)), wantErr: auth.ErrAlgorithm},
		{name: "bad signature: other key", token: sign(t, auth.RS256, rsaKey2(), "rsa", claims(nil)), wantErr: auth.ErrSignature, wantMsg: `static key "rsa"`},
		{name: "bad signature: other secret", token: sign(t, auth.HS256, []byte(strings.Repeat("x", 32)), "hs", claims(nil)), wantErr: auth.ErrSignature},
		{name: "bad signature: payload swapped", token: parts[0] + "." + otherPayload + "." + parts[2], wantErr: auth.ErrSignature},
		{name: "no signature", token: parts[0] + "." + parts[1] + ".", wantErr: auth.ErrMalformed, wantMsg: "no signature"},
		{name: "expired beyond leeway", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"exp": t0.Add(-31 * time.Second).Unix()})), wantErr: auth.ErrTokenExpired, wantMsg: "31s ago (leeway 30s)"},
		{name: "expired long ago", token: sign(t, auth.RS256, rsaKey(), "rsa", claims(map[string]any{"exp": t0.Add(-24 * time.Hour).Unix()})), wantErr: auth.ErrTokenExpired},
		{name: "nbf in the future", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"nbf": t0.Add(31 * time.Second).Unix()})), wantErr: auth.ErrNotYetValid},
		{name: "missing exp", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"exp": nil})), wantErr: auth.ErrMissingClaim, wantMsg: "exp"},
		{name: "exp not a number", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"exp": "tomorrow"})), wantErr: auth.ErrMalformed, wantMsg: "exp"},
		{name: "exp out of range", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"exp": 1e300})), wantErr: auth.ErrMalformed, wantMsg: "out of range"},
		{name: "wrong aud", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"aud": "other"})), wantErr: auth.ErrAudience, wantMsg: `"other"`},
		{name: "wrong aud array", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"aud": []string{"a", "b"}})), wantErr: auth.ErrAudience},
		{name: "missing aud", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"aud": nil})), wantErr: auth.ErrMissingClaim, wantMsg: "aud"},
		{name: "aud not a string", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"aud": 7})), wantErr: auth.ErrMalformed},
		{name: "wrong iss", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"iss": "https://evil.example"})), wantErr: auth.ErrIssuer, wantMsg: "evil"},
		{name: "missing iss", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"iss": nil})), wantErr: auth.ErrMissingClaim, wantMsg: "iss"},
		{name: "unknown kid", token: sign(t, auth.HS256, hmacSecret, "nope", claims(nil)), wantErr: auth.ErrUnknownKey, wantMsg: `"nope"`},
		{name: "1 MB token", token: strings.Repeat("a", 1<<20), wantErr: auth.ErrTooLarge, wantMsg: "1048576 bytes"},
		{name: "100000 dots", token: strings.Repeat(".", 100000), wantErr: auth.ErrTooLarge},
		{name: "empty", token: "", wantErr: auth.ErrMalformed},
		{name: "one part", token: "abc", wantErr: auth.ErrMalformed, wantMsg: "got 1"},
		{name: "four parts", token: valid + ".x", wantErr: auth.ErrMalformed},
		{name: "padding", token: parts[0] + "=." + parts[1] + "." + parts[2], wantErr: auth.ErrMalformed, wantMsg: "base64url"},
		{name: "JSON serialization", token: `{"payload":"x","signatures":[]}`, wantErr: auth.ErrMalformed},
		{name: "header not JSON", token: "bm90IGpzb24." + parts[1] + "." + parts[2], wantErr: auth.ErrMalformed, wantMsg: "header"},
		{name: "crit header", token: rawToken(t, map[string]any{"alg": "HS256", "crit": []string{"exp"}}, claims(nil), parts[2]), wantErr: auth.ErrMalformed, wantMsg: "crit"},
		{name: "claims not an object", token: sign(t, auth.HS256, hmacSecret, "hs", nil), wantErr: auth.ErrMalformed, wantMsg: "claims"},
		{name: "bad policy claim", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"policy": map[string]any{"rules": []any{map[string]any{"effect": "allow", "action": "publish", "topics": []string{"a.b*"}}}}})), wantErr: auth.ErrPolicy, wantMsg: "a.b*"},
		{name: "bad scope", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"scopes": []string{"publish:a..b"}})), wantErr: auth.ErrPolicy, wantMsg: "publish:a..b"},
		{name: "scopes not strings", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"scopes": []int{1}})), wantErr: auth.ErrMalformed, wantMsg: "scopes"},
		{name: "sub not a string", token: sign(t, auth.HS256, hmacSecret, "hs", claims(map[string]any{"sub": 1})), wantErr: auth.ErrMalformed, wantMsg: "sub"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := v.Verify(context.Background(), tt.token)
			require.Error(t, err)
			assert.Nil(t, p)
			assert.ErrorIs(t, err, auth.ErrInvalidToken)
			assert.ErrorIs(t, err, tt.wantErr)
			if tt.wantErr != auth.ErrTokenExpired {
				assert.NotErrorIs(t, err, auth.ErrTokenExpired)
			}
			var te *auth.TokenError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tt.wantErr, te.Reason)
			if tt.wantMsg != "" {
				assert.Contains(t, err.Error(), tt.wantMsg)
			}
			assert.Less(t, len(err.Error()), 400, "the message stays short: %s", err)
			t.Logf("%s", err)
		})
	}
}

// A verifier that knows only an RSA key refuses HS256 tokens, however they
// were made: the algorithm is pinned to the key, not taken from the token.
func TestAlgorithmConfusion(t *testing.T) {
	t.Parallel()
	pub := &rsaKey().PublicKey
	v := newVerifier(t, auth.Config{Keys: []auth.PublicKey{{Key: pub}}, Clock: clock.NewFake(t0)})
	der := pemPublic(t, pub)
	for name, secret := range map[string][]byte{
		"PEM":         der,
		"PEM no NL":   []byte(strings.TrimSpace(string(der))),
		"raw modulus": pub.N.Bytes(),
	} {
		for _, alg := range []string{auth.HS256, auth.HS384, auth.HS512} {
			_, err := v.Verify(context.Background(), sign(t, alg, secret, "", claims(nil)))
			require.ErrorIs(t, err, auth.ErrAlgorithm, "%s %s", name, alg)
			assert.Contains(t, err.Error(), "not allowed for any configured key")
		}
	}
	// The key accepts its own algorithm, and no other RSA one.
	_, err := v.Verify(context.Background(), sign(t, auth.RS256, rsaKey(), "", claims(nil)))
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), sign(t, auth.PS256, rsaKey(), "", claims(nil)))
	require.ErrorIs(t, err, auth.ErrAlgorithm)
}

func TestTooLargeWithBiggerCap(t *testing.T) {
	t.Parallel()
	cfg := staticConfig()
	cfg.MaxTokenSize = 2 << 20
	v := newVerifier(t, cfg)
	_, err := v.Verify(context.Background(), strings.Repeat(".", 100000))
	require.ErrorIs(t, err, auth.ErrMalformed)
	assert.Contains(t, err.Error(), "more than three")
	_, err = v.Verify(context.Background(), strings.Repeat("a", 1<<20))
	require.ErrorIs(t, err, auth.ErrMalformed)
	_, err = v.Verify(context.Background(), strings.Repeat("a", 3<<20))
	require.ErrorIs(t, err, auth.ErrTooLarge)
}

func TestPrincipal(t *testing.T) {
	t.Parallel()
	cfg := staticConfig()
	v := newVerifier(t, cfg)
	cfg.DefaultScopes = []string{"subscribe:public.**"}
	vDefault := newVerifier(t, cfg)

	policyDoc := map[string]any{"rules": []any{
		map[string]any{"effect": "allow", "action": "*", "topics": []string{"a.**"}},
		map[string]any{"effect": "deny", "action": "publish", "topics": []string{"a.secret"}},
	}}
	tests := []struct {
		name       string
		v          *auth.JWTVerifier
		claims     map[string]any
		wantScopes []string
		allowed    [][2]string // action, topic
		refused    [][2]string
	}{
		{
			name:       "scopes array",
			claims:     map[string]any{"scopes": []string{"publish:a.*", "subscribe:b.**"}},
			wantScopes: []string{"publish:a.*", "subscribe:b.**"},
			allowed:    [][2]string{{"publish", "a.b"}, {"subscribe", "b.c.d"}},
			refused:    [][2]string{{"publish", "b.c"}, {"subscribe", "a.b"}, {"replay", "a.b"}},
		},
		{
			name:       "scope string, OAuth style, with foreign scopes",
			claims:     map[string]any{"scope": "openid profile publish:a.* read:user"},
			wantScopes: []string{"openid", "profile", "publish:a.*", "read:user"},
			allowed:    [][2]string{{"publish", "a.b"}},
			refused:    [][2]string{{"subscribe", "a.b"}},
		},
		{
			name:       "scopes string and scope merged",
			claims:     map[string]any{"scopes": "publish:a.*", "scope": "replay:**"},
			wantScopes: []string{"publish:a.*", "replay:**"},
			allowed:    [][2]string{{"publish", "a.b"}, {"replay", "x.y"}},
		},
		{
			name:    "policy claim wins over scopes",
			claims:  map[string]any{"policy": policyDoc, "scopes": []string{"publish:z"}},
			allowed: [][2]string{{"publish", "a.b.c"}, {"subscribe", "a.secret"}},
			refused: [][2]string{{"publish", "a.secret"}, {"publish", "z"}},

			wantScopes: []string{"publish:z"},
		},
		{
			name:    "policy claim as a string",
			claims:  map[string]any{"policy": `{"rules":[{"effect":"allow","action":"replay","topics":["r.*"]}]}`},
			allowed: [][2]string{{"replay", "r.x"}},
			refused: [][2]string{{"publish", "r.x"}},
		},
		{
			name:    "nothing: may do nothing",
			claims:  map[string]any{},
			refused: [][2]string{{"publish", "a"}, {"subscribe", "public.x"}},
		},
		{
			name:       "only foreign scopes: may do nothing",
			claims:     map[string]any{"scope": "openid"},
			wantScopes: []string{"openid"},
			refused:    [][2]string{{"publish", "a"}},
		},
		{
			name:    "default scopes",
			v:       vDefault,
			claims:  map[string]any{},
			allowed: [][2]string{{"subscribe", "public.x"}},
			refused: [][2]string{{"publish", "public.x"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vv := v
			if tt.v != nil {
				vv = tt.v
			}
			p, err := vv.Verify(context.Background(), sign(t, auth.HS256, hmacSecret, "hs", claims(tt.claims)))
			require.NoError(t, err)
			assert.Equal(t, "svc-a", p.Subject)
			// Refused from exp plus the 30s leeway on; exp itself is in Claims.
			assert.True(t, p.Expiry.Equal(t0.Add(time.Hour+30*time.Second)), "expiry %s", p.Expiry)
			assert.Equal(t, float64(t0.Add(time.Hour).Unix()), p.Claims["exp"])
			assert.Equal(t, tt.wantScopes, p.Scopes)
			assert.Equal(t, "https://issuer.example", p.Claims["iss"])
			assert.Equal(t, float64(t0.Unix()), p.Claims["iat"])
			for _, a := range tt.allowed {
				assert.NoError(t, p.Check(acl.Action(a[0]), a[1], ""), "%v", a)
			}
			for _, a := range tt.refused {
				assert.ErrorIs(t, p.Check(acl.Action(a[0]), a[1], ""), acl.ErrForbidden, "%v", a)
			}
		})
	}

	var nobody *auth.Principal
	assert.ErrorIs(t, nobody.Check(acl.Publish, "a", ""), acl.ErrForbidden)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	weak := genRSA(1024)
	tests := []struct {
		name    string
		cfg     auth.Config
		wantMsg []string
	}{
		{name: "no key source", cfg: auth.Config{}, wantMsg: []string{"no key source"}},
		{name: "short secret", cfg: auth.Config{Secrets: []auth.Secret{{Key: []byte("short")}}}, wantMsg: []string{"Secrets[0].Key", "at least 32"}},
		{name: "short HS512 secret", cfg: auth.Config{Secrets: []auth.Secret{{Algorithm: auth.HS512, Key: hmacSecret}}}, wantMsg: []string{"at least 64"}},
		{name: "secret with RS256", cfg: auth.Config{Secrets: []auth.Secret{{Algorithm: auth.RS256, Key: hmacSecret}}}, wantMsg: []string{"Secrets[0].Algorithm"}},
		{name: "secret with none", cfg: auth.Config{Secrets: []auth.Secret{{Algorithm: "none", Key: hmacSecret}}}, wantMsg: []string{`"none"`}},
		{name: "weak RSA key", cfg: auth.Config{Keys: []auth.PublicKey{{Key: &weak.PublicKey}}}, wantMsg: []string{"Keys[0].Key", "1024 bits"}},
		{name: "private key", cfg: auth.Config{Keys: []auth.PublicKey{{Key: rsaKey()}}}, wantMsg: []string{"private key"}},
		{name: "bytes as public key", cfg: auth.Config{Keys: []auth.PublicKey{{Key: hmacSecret}}}, wantMsg: []string{"Config.Secrets"}},
		{name: "RSA key with HS256", cfg: auth.Config{Keys: []auth.PublicKey{{Algorithm: auth.HS256, Key: &rsaKey().PublicKey}}}, wantMsg: []string{"Keys[0].Algorithm", `"HS256"`}},
		{name: "EC key with ES384", cfg: auth.Config{Keys: []auth.PublicKey{{Algorithm: auth.ES384, Key: &ecKey().PublicKey}}}, wantMsg: []string{"Keys[0].Algorithm"}},
		{name: "duplicate kid", cfg: auth.Config{Secrets: []auth.Secret{{ID: "k", Key: hmacSecret}}, Keys: []auth.PublicKey{{ID: "k", Key: &ecKey().PublicKey}}}, wantMsg: []string{"Keys[0].ID", "Secrets[0]"}},
		{name: "http JWKS", cfg: auth.Config{JWKS: auth.JWKSConfig{URL: "http://idp.example/jwks"}}, wantMsg: []string{"JWKS.URL", "loopback"}},
		{name: "ftp JWKS", cfg: auth.Config{JWKS: auth.JWKSConfig{URL: "ftp://idp.example/jwks"}}, wantMsg: []string{"JWKS.URL", "scheme"}},
		{name: "JWKS symmetric alg", cfg: auth.Config{JWKS: auth.JWKSConfig{URL: "https://idp.example/jwks", Algorithms: []string{auth.HS256}}}, wantMsg: []string{"JWKS.Algorithms[0]"}},
		{name: "negative durations", cfg: auth.Config{Secrets: []auth.Secret{{Key: hmacSecret}}, Leeway: -1, JWKS: auth.JWKSConfig{FetchTimeout: -1}}, wantMsg: []string{"Leeway", "JWKS.FetchTimeout"}},
		{name: "bad default scope", cfg: auth.Config{Secrets: []auth.Secret{{Key: hmacSecret}}, DefaultScopes: []string{"publish"}}, wantMsg: []string{"DefaultScopes", `"publish"`}},
		{name: "empty audience", cfg: auth.Config{Secrets: []auth.Secret{{Key: hmacSecret}}, Audiences: []string{""}}, wantMsg: []string{"Audiences[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			require.ErrorIs(t, err, auth.ErrInvalid)
			for _, m := range tt.wantMsg {
				assert.Contains(t, err.Error(), m)
			}
			v, err2 := auth.NewJWTVerifier(tt.cfg)
			assert.Nil(t, v)
			assert.Equal(t, err.Error(), err2.Error())
		})
	}
	for _, ok := range []auth.Config{
		{Secrets: []auth.Secret{{Key: hmacSecret}}},
		{JWKS: auth.JWKSConfig{URL: "http://127.0.0.1:1/jwks"}},
		{JWKS: auth.JWKSConfig{URL: "http://localhost/jwks"}},
		{JWKS: auth.JWKSConfig{URL: "https://idp.example/.well-known/jwks.json"}},
	} {
		assert.NoError(t, ok.Validate())
	}
}

func TestParsePublicKeyPEM(t *testing.T) {
	t.Parallel()
	for _, pub := range []any{&rsaKey().PublicKey, &ecKey().PublicKey, edKey().Public()} {
		k, err := auth.ParsePublicKeyPEM(pemPublic(t, pub))
		require.NoError(t, err)
		assert.Equal(t, pub, k)
	}
	_, err := auth.ParsePublicKeyPEM([]byte("not pem"))
	assert.ErrorIs(t, err, auth.ErrInvalid)
}

func TestConfigIsCopied(t *testing.T) {
	t.Parallel()
	secret := append([]byte(nil), hmacSecret...)
	cfg := auth.Config{Secrets: []auth.Secret{{Key: secret}}, Clock: clock.NewFake(t0)}
	v := newVerifier(t, cfg)
	secret[0] ^= 0xff
	_, err := v.Verify(context.Background(), sign(t, auth.HS256, hmacSecret, "", claims(nil)))
	require.NoError(t, err)
}

func TestVerifyAfterClose(t *testing.T) {
	t.Parallel()
	v, err := auth.NewJWTVerifier(staticConfig())
	require.NoError(t, err)
	require.NoError(t, v.Close())
	require.NoError(t, v.Close())
	_, err = v.Verify(context.Background(), sign(t, auth.HS256, hmacSecret, "hs", claims(nil)))
	require.ErrorIs(t, err, auth.ErrClosed)
	assert.False(t, errors.Is(err, auth.ErrInvalidToken))
}
