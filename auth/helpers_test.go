package auth_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/stretchr/testify/require"
)

// Keys are generated once per test binary: RSA generation is slow.
var (
	rsaKey  = sync.OnceValue(func() *rsa.PrivateKey { return genRSA(2048) })
	rsaKey2 = sync.OnceValue(func() *rsa.PrivateKey { return genRSA(2048) })
	ecKey   = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
	edKey = sync.OnceValue(func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

func genRSA(bits int) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		panic(err)
	}
	return k
}

var hmacSecret = []byte("0123456789abcdef0123456789abcdef") // 32 bytes

// t0 is the fixed "now" of most tests.
var t0 = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// claims returns a valid claims set at t0, with overrides; a nil value
// removes the claim.
func claims(over map[string]any) map[string]any {
	c := map[string]any{
		"sub": "svc-a",
		"iss": "https://issuer.example",
		"aud": "promlib",
		"exp": t0.Add(time.Hour).Unix(),
		"iat": t0.Unix(),
	}
	for k, v := range over {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// sign makes a compact JWS of the claims with alg and key, and kid in the
// header when not empty.
func sign(t testing.TB, alg string, key any, kid string, cl map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(cl)
	require.NoError(t, err)
	h := jws.NewHeaders()
	if kid != "" {
		require.NoError(t, h.Set(jws.KeyIDKey, kid))
	}
	tok, err := jws.Sign(payload, jws.WithKey(jwa.SignatureAlgorithm(alg), key, jws.WithProtectedHeaders(h)))
	require.NoError(t, err)
	return string(tok)
}

// rawToken assembles a token from a header, claims and a signature as given,
// for tokens no signer would make.
func rawToken(t testing.TB, header map[string]any, cl map[string]any, sig string) string {
	t.Helper()
	h, err := json.Marshal(header)
	require.NoError(t, err)
	p, err := json.Marshal(cl)
	require.NoError(t, err)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(p) + "." + sig
}

func pemPublic(t testing.TB, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// signRaw signs payload bytes as they are with the HMAC secret, kid "hs".
func signRaw(t testing.TB, payload []byte) string {
	t.Helper()
	h := jws.NewHeaders()
	require.NoError(t, h.Set(jws.KeyIDKey, "hs"))
	tok, err := jws.Sign(payload, jws.WithKey(jwa.HS256, hmacSecret, jws.WithProtectedHeaders(h)))
	require.NoError(t, err)
	return string(tok)
}
