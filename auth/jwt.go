package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/promethean/promlib/acl"
)

// JWTVerifier is the [Verifier] of JSON Web Tokens: it checks a token's
// signature and claims and turns them into a [Principal]. It is safe for
// concurrent use. With a JWKS URL it runs one goroutine that keeps the key
// set fresh; Close stops it.
type JWTVerifier struct {
	cfg      Config
	static   []verifyKey
	defaults *acl.Policy // from Config.DefaultScopes
	jwks     *jwksCache  // nil without JWKS.URL
	log      *slog.Logger

	closed    atomic.Bool
	closeOnce sync.Once
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// NewJWTVerifier validates cfg and builds a JWTVerifier. With a JWKS URL it starts
// fetching the key set at once, in the background; Verify waits for the
// first fetch if it has to.
func NewJWTVerifier(cfg Config) (*JWTVerifier, error) {
	cfg = cfg.clone()
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := &JWTVerifier{cfg: cfg, log: cfg.Logger}
	for _, s := range cfg.Secrets {
		v.static = append(v.static, verifyKey{id: s.ID, algs: []string{s.Algorithm}, key: s.Key, source: "HMAC"})
	}
	for _, k := range cfg.Keys {
		v.static = append(v.static, verifyKey{id: k.ID, algs: []string{k.Algorithm}, key: k.Key, source: "static"})
	}
	defaults, err := acl.FromScopes(cfg.DefaultScopes)
	if err != nil {
		return nil, fmt.Errorf("%w: DefaultScopes: %w", ErrInvalid, err)
	}
	v.defaults = defaults
	if cfg.JWKS.URL != "" {
		v.jwks = newJWKSCache(cfg.JWKS, cfg.Clock, cfg.Logger)
		ctx, cancel := context.WithCancel(context.Background())
		v.cancel = cancel
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			v.jwks.run(ctx)
		}()
	}
	return v, nil
}

// Close stops the key-set refresher and waits for it. It is idempotent;
// Verify returns ErrClosed afterwards.
func (v *JWTVerifier) Close() error {
	v.closeOnce.Do(func() {
		v.closed.Store(true)
		if v.cancel != nil {
			v.cancel()
		}
		v.wg.Wait()
	})
	return nil
}

// header is the part of the JOSE header that Verify looks at.
type header struct {
	Alg  *string         `json:"alg"`
	Kid  *string         `json:"kid"`
	Crit json.RawMessage `json:"crit"`
	B64  json.RawMessage `json:"b64"`
}

var _ Verifier = (*JWTVerifier)(nil)

// Verify checks a compact JWS token and returns its principal. In order:
// size cap (before any parsing), shape (three base64url parts), header (alg
// known and not "none", no crit), key (by kid, the algorithm pinned to the
// key must be the token's), signature, then claims: exp required, nbf,
// iss and aud as configured, policy or scopes. Every rejection is a
// [*TokenError] (errors.Is [ErrInvalidToken] and its reason); other errors
// are [ErrKeysUnavailable], [ErrClosed] or ctx's error.
func (v *JWTVerifier) Verify(ctx context.Context, token string) (*Principal, error) {
	if v.closed.Load() {
		return nil, ErrClosed
	}
	if len(token) > v.cfg.MaxTokenSize {
		return nil, tokenErr(ErrTooLarge, nil, "%d bytes, more than %d", len(token), v.cfg.MaxTokenSize)
	}
	parts, err := splitCompact(token)
	if err != nil {
		return nil, err
	}
	alg, kid, err := parseHeader(parts[0])
	if err != nil {
		return nil, err
	}
	if parts[2] == "" {
		return nil, tokenErr(ErrMalformed, nil, "no signature")
	}
	keys, err := v.keysFor(ctx, kid, alg)
	if err != nil {
		return nil, err
	}
	var payload []byte
	var lastErr error
	for i := range keys {
		payload, lastErr = jws.Verify([]byte(token), jws.WithKey(jwa.SignatureAlgorithm(alg), keys[i].key), jws.WithCompact())
		if lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		if len(keys) == 1 {
			return nil, tokenErr(ErrSignature, nil, "%s does not verify with %s", alg, keys[0].describe())
		}
		return nil, tokenErr(ErrSignature, nil, "%s does not verify with any of %d keys", alg, len(keys))
	}
	return v.principal(payload)
}

// splitCompact checks the shape of a compact JWS: three parts of base64url
// characters (no padding) separated by two dots. It looks at each byte
// once, so a token of many dots is refused in linear time.
func splitCompact(token string) ([3]string, error) {
	var parts [3]string
	if token == "" {
		return parts, tokenErr(ErrMalformed, nil, "empty token")
	}
	n, start := 0, 0
	for i := 0; i < len(token); i++ {
		c := token[i]
		switch {
		case c == '.':
			if n == 2 {
				return parts, tokenErr(ErrMalformed, nil, "more than three dot-separated parts; want header.payload.signature")
			}
			parts[n] = token[start:i]
			n++
			start = i + 1
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return parts, tokenErr(ErrMalformed, nil, "byte %q at offset %d is not base64url", c, i)
		}
	}
	if n != 2 {
		return parts, tokenErr(ErrMalformed, nil, "want 3 dot-separated parts (header.payload.signature), got %d", n+1)
	}
	parts[2] = token[start:]
	if parts[0] == "" || parts[1] == "" {
		return parts, tokenErr(ErrMalformed, nil, "empty header or payload")
	}
	return parts, nil
}

func parseHeader(enc string) (alg, kid string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", "", tokenErr(ErrMalformed, err, "header is not base64url")
	}
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", "", tokenErr(ErrMalformed, err, "header is not a JSON object")
	}
	if h.Alg == nil || *h.Alg == "" {
		return "", "", tokenErr(ErrMalformed, nil, "header has no alg")
	}
	alg = *h.Alg
	if strings.EqualFold(alg, "none") {
		return "", "", tokenErr(ErrAlgorithm, nil, `alg "none": unsigned tokens are never accepted`)
	}
	if !knownAlg(alg) {
		return "", "", tokenErr(ErrAlgorithm, nil, "alg %q is not supported", clip(alg))
	}
	if h.Crit != nil {
		return "", "", tokenErr(ErrMalformed, nil, "header has crit; no critical extension is supported")
	}
	if h.B64 != nil {
		return "", "", tokenErr(ErrMalformed, nil, "header has b64; unencoded payloads are not supported")
	}
	if h.Kid != nil {
		kid = *h.Kid
	}
	return alg, kid, nil
}

// keysFor returns the keys to try: those with the token's kid if it has
// one (fetching the key set again if none has it), else every key; in both
// cases only keys pinned to the token's algorithm.
func (v *JWTVerifier) keysFor(ctx context.Context, kid, alg string) ([]verifyKey, error) {
	var named []verifyKey
	for i := range v.static {
		if kid == "" || v.static[i].id == kid {
			named = append(named, v.static[i])
		}
	}
	if v.jwks != nil && (kid == "" || len(named) == 0) {
		fetched, err := v.jwks.lookup(ctx, kid)
		if err != nil {
			if kid == "" && len(named) > 0 {
				v.log.Debug("auth: JWKS unavailable; trying the static keys only", "err", err)
			} else {
				return nil, err
			}
		}
		named = append(named, fetched...)
	}
	if len(named) == 0 {
		if kid == "" {
			return nil, tokenErr(ErrUnknownKey, nil, "no key is configured")
		}
		return nil, tokenErr(ErrUnknownKey, nil, "no key has kid %q", clip(kid))
	}
	usable := named[:0:0]
	for i := range named {
		if named[i].allows(alg) {
			usable = append(usable, named[i])
		}
	}
	if len(usable) == 0 {
		if kid != "" && len(named) == 1 {
			return nil, tokenErr(ErrAlgorithm, nil, "alg %s is not allowed for %s", alg, named[0].describe())
		}
		return nil, tokenErr(ErrAlgorithm, nil, "alg %s is not allowed for any configured key", alg)
	}
	return usable, nil
}

// clip shortens attacker-chosen strings quoted in error messages.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// now is the verifier's clock.
func (v *JWTVerifier) now() time.Time { return v.cfg.Clock.Now() }
