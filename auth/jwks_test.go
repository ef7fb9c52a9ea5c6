package auth_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
)

// jwksServer serves a key set that the test can swap, and counts requests.
type jwksServer struct {
	*httptest.Server
	body     atomic.Pointer[[]byte]
	status   atomic.Int32
	requests atomic.Int64
}

func newJWKSServer(t *testing.T, keys ...jwk.Key) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.status.Store(http.StatusOK)
	s.set(t, keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if st := int(s.status.Load()); st != http.StatusOK {
			http.Error(w, "down", st)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(t *testing.T, keys ...jwk.Key) {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		require.NoError(t, set.AddKey(k))
	}
	b, err := json.Marshal(set)
	require.NoError(t, err)
	s.body.Store(&b)
}

// pubJWK makes the public JWK of a private key, with kid and (if not
// empty) alg.
func pubJWK(t *testing.T, priv any, kid, alg string) jwk.Key {
	t.Helper()
	k, err := jwk.PublicKeyOf(priv)
	require.NoError(t, err)
	require.NoError(t, k.Set(jwk.KeyIDKey, kid))
	if alg != "" {
		require.NoError(t, k.Set(jwk.AlgorithmKey, alg))
	}
	return k
}

func jwksVerifier(t *testing.T, url string, c *clock.Fake, refresh, minRefetch time.Duration) *auth.JWTVerifier {
	t.Helper()
	return newVerifier(t, auth.Config{
		JWKS:  auth.JWKSConfig{URL: url, RefreshInterval: refresh, MinRefetchInterval: minRefetch},
		Clock: c,
	})
}

func verify(v *auth.JWTVerifier, token string) error {
	_, err := v.Verify(context.Background(), token)
	return err
}

// A token signed with a new key is accepted once the set has it: an unknown
// kid triggers a refetch when the rate limit allows one.
func TestJWKSRotationOnUnknownKid(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t, pubJWK(t, rsaKey(), "k1", auth.RS256))
	c := clock.NewFake(t0)
	v := jwksVerifier(t, srv.URL, c, time.Hour, time.Minute)

	tok1 := sign(t, auth.RS256, rsaKey(), "k1", claims(nil))
	tok2 := sign(t, auth.RS256, rsaKey2(), "k2", claims(nil))
	require.NoError(t, verify(v, tok1))
	assert.EqualValues(t, 1, srv.requests.Load())

	srv.set(t, pubJWK(t, rsaKey2(), "k2", auth.RS256)) // rotate: k1 retired
	// Within the minimum interval no refetch happens: k2 is unknown yet.
	require.ErrorIs(t, verify(v, tok2), auth.ErrUnknownKey)
	assert.EqualValues(t, 1, srv.requests.Load())

	c.Advance(time.Minute)
	require.NoError(t, verify(v, tok2))
	assert.EqualValues(t, 2, srv.requests.Load())
	require.NoError(t, verify(v, tok2), "served from the cache")
	// k1 is gone with the rotation.
	require.ErrorIs(t, verify(v, tok1), auth.ErrUnknownKey)
	assert.EqualValues(t, 2, srv.requests.Load())
}

// The background refresh picks up a rotation without any unknown kid.
func TestJWKSRotationOnRefresh(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t, pubJWK(t, edKey(), "k1", ""))
	c := clock.NewFake(t0) // advanced by less than an hour: the kid-triggered refetch stays rate-limited
	v := jwksVerifier(t, srv.URL, c, 20*time.Millisecond, time.Hour)

	tok1 := sign(t, auth.EdDSA, edKey(), "k1", claims(nil))
	require.NoError(t, verify(v, tok1))
	srv.set(t, pubJWK(t, ecKey(), "k2", ""))
	tok2 := sign(t, auth.ES256, ecKey(), "k2", claims(nil))
	require.Eventually(t, func() bool {
		c.Advance(20 * time.Millisecond) // the refresh timer is on the verifier's clock
		return verify(v, tok2) == nil
	}, 5*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, verify(v, tok1), auth.ErrUnknownKey)
}

// A flood of tokens with made-up kids causes at most one fetch per
// MinRefetchInterval.
func TestJWKSUnknownKidFlood(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t, pubJWK(t, rsaKey(), "k1", auth.RS256))
	c := clock.NewFake(t0)
	v := jwksVerifier(t, srv.URL, c, time.Hour, time.Minute)
	require.NoError(t, verify(v, sign(t, auth.RS256, rsaKey(), "k1", claims(nil))))
	require.EqualValues(t, 1, srv.requests.Load())

	// One signed token, many kids: the header is all that is looked at
	// before the refetch decision.
	flood := func() {
		tokens := make([]string, 400)
		for i := range tokens {
			kid := make([]byte, 8)
			_, _ = rand.Read(kid)
			tokens[i] = sign(t, auth.HS256, hmacSecret, fmt.Sprintf("%x", kid), claims(nil))
		}
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(tokens); i += 8 {
					assert.ErrorIs(t, verify(v, tokens[i]), auth.ErrUnknownKey)
				}
			}()
		}
		wg.Wait()
	}
	flood()
	assert.EqualValues(t, 1, srv.requests.Load(), "no refetch within the interval")

	c.Advance(time.Minute)
	flood()
	assert.EqualValues(t, 2, srv.requests.Load(), "one refetch for the whole flood")

	c.Advance(30 * time.Second)
	flood()
	assert.EqualValues(t, 2, srv.requests.Load())
}

func TestJWKSUnavailable(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t, pubJWK(t, rsaKey(), "k1", ""))
	srv.status.Store(http.StatusInternalServerError)
	c := clock.NewFake(t0)
	v := jwksVerifier(t, srv.URL, c, time.Hour, time.Minute)
	tok := sign(t, auth.RS256, rsaKey(), "k1", claims(nil))

	err := verify(v, tok)
	require.ErrorIs(t, err, auth.ErrKeysUnavailable)
	assert.NotErrorIs(t, err, auth.ErrInvalidToken, "not the token's fault")
	assert.Contains(t, err.Error(), "500")
	// Rate-limited: no new fetch, same answer.
	require.ErrorIs(t, verify(v, tok), auth.ErrKeysUnavailable)
	assert.EqualValues(t, 1, srv.requests.Load())

	srv.status.Store(http.StatusOK)
	c.Advance(time.Minute)
	require.NoError(t, verify(v, tok))

	// Down again: the keys fetched before stay in use.
	srv.status.Store(http.StatusBadGateway)
	c.Advance(time.Minute)
	require.ErrorIs(t, verify(v, sign(t, auth.RS256, rsaKey(), "k9", claims(nil))), auth.ErrUnknownKey)
	assert.EqualValues(t, 3, srv.requests.Load())
	require.NoError(t, verify(v, tok))
}

func TestJWKSKeySelection(t *testing.T) {
	t.Parallel()
	weak := genRSA(1024)
	oct, err := jwk.FromRaw(hmacSecret)
	require.NoError(t, err)
	require.NoError(t, oct.Set(jwk.KeyIDKey, "oct"))
	enc := pubJWK(t, rsaKey2(), "enc", "")
	require.NoError(t, enc.Set(jwk.KeyUsageKey, "enc"))
	srv := newJWKSServer(t,
		pubJWK(t, rsaKey(), "any-rsa", ""),        // no alg: RS* and PS*
		pubJWK(t, rsaKey2(), "rs256", auth.RS256), // pinned by its alg
		pubJWK(t, weak, "weak", ""),               // too short: skipped
		oct,                                       // symmetric: skipped
		enc,                                       // not for signatures: skipped
		pubJWK(t, ecKey(), "ec", ""),              // ES256 by curve
	)
	v := jwksVerifier(t, srv.URL, clock.NewFake(t0), time.Hour, time.Hour)

	tests := []struct {
		name    string
		token   string
		wantErr error
	}{
		{name: "no alg, RS256", token: sign(t, auth.RS256, rsaKey(), "any-rsa", claims(nil))},
		{name: "no alg, PS384", token: sign(t, auth.PS384, rsaKey(), "any-rsa", claims(nil))},
		{name: "no alg, HS256 refused", token: sign(t, auth.HS256, hmacSecret, "any-rsa", claims(nil)), wantErr: auth.ErrAlgorithm},
		{name: "alg RS256", token: sign(t, auth.RS256, rsaKey2(), "rs256", claims(nil))},
		{name: "alg RS256, PS256 refused", token: sign(t, auth.PS256, rsaKey2(), "rs256", claims(nil)), wantErr: auth.ErrAlgorithm},
		{name: "EC by curve", token: sign(t, auth.ES256, ecKey(), "ec", claims(nil))},
		{name: "weak key skipped", token: sign(t, auth.RS256, weak, "weak", claims(nil)), wantErr: auth.ErrUnknownKey},
		{name: "oct key skipped", token: sign(t, auth.HS256, hmacSecret, "oct", claims(nil)), wantErr: auth.ErrUnknownKey},
		{name: "enc key skipped", token: sign(t, auth.RS256, rsaKey2(), "enc", claims(nil)), wantErr: auth.ErrUnknownKey},
		{name: "no kid: every key of the alg", token: sign(t, auth.ES256, ecKey(), "", claims(nil))},
		{name: "no kid, HS256: no key", token: sign(t, auth.HS256, hmacSecret, "", claims(nil)), wantErr: auth.ErrAlgorithm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := verify(v, tt.token)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

// Static keys and a key set combine; a kid found among the static keys
// never causes a fetch.
func TestJWKSWithStaticKeys(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t, pubJWK(t, rsaKey(), "remote", ""))
	v := newVerifier(t, auth.Config{
		Secrets: []auth.Secret{{ID: "local", Key: hmacSecret}},
		JWKS:    auth.JWKSConfig{URL: srv.URL, RefreshInterval: time.Hour},
		Clock:   clock.NewFake(t0),
	})
	require.NoError(t, verify(v, sign(t, auth.HS256, hmacSecret, "local", claims(nil))))
	require.NoError(t, verify(v, sign(t, auth.RS256, rsaKey(), "remote", claims(nil))))
	require.NoError(t, verify(v, sign(t, auth.HS256, hmacSecret, "", claims(nil))))
	require.NoError(t, verify(v, sign(t, auth.RS256, rsaKey(), "", claims(nil))))
	assert.EqualValues(t, 1, srv.requests.Load())
}

// Close does not wait for a slow key server: the fetch is canceled.
func TestJWKSCloseDuringFetch(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	v, err := auth.NewJWTVerifier(auth.Config{JWKS: auth.JWKSConfig{URL: srv.URL}})
	require.NoError(t, err)

	tok := sign(t, auth.RS256, rsaKey(), "k1", claims(nil))
	errc := make(chan error, 1)
	go func() { errc <- verify(v, tok) }()
	<-entered
	require.NoError(t, v.Close())
	select {
	case err := <-errc:
		require.Error(t, err)
		assert.True(t, errors.Is(err, auth.ErrClosed) || errors.Is(err, auth.ErrKeysUnavailable), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Verify still waiting after Close")
	}
}

// A caller's context bounds its wait for the first fetch.
func TestJWKSVerifyContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	v := newVerifier(t, auth.Config{JWKS: auth.JWKSConfig{URL: srv.URL}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := v.Verify(ctx, sign(t, auth.RS256, rsaKey(), "k1", claims(nil)))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
