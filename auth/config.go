package auth

import (
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/clock"
)

// Defaults of [Config] and [JWKSConfig].
const (
	DefaultMaxTokenSize       = 8 << 10
	DefaultRefreshInterval    = 15 * time.Minute
	DefaultMinRefetchInterval = time.Minute
	DefaultFetchTimeout       = 10 * time.Second
	DefaultMaxJWKSBytes       = 1 << 20
)

// Secret is an HMAC key.
type Secret struct {
	// ID is the kid of the tokens signed with it. A token that carries a
	// kid is only checked against keys with that ID; one without a kid is
	// checked against every key whose algorithm it names.
	ID string
	// Algorithm is HS256 (the default), HS384 or HS512, and the only one
	// this key accepts.
	Algorithm string
	// Key is at least as long as the hash: 32, 48 or 64 bytes.
	Key []byte
}

// PublicKey is a static RSA, ECDSA or Ed25519 public key.
type PublicKey struct {
	// ID is the kid of the tokens signed with it (see [Secret.ID]).
	ID string
	// Algorithm is the only algorithm this key accepts. The default follows
	// the key: RS256 for RSA, ES256/ES384/ES512 for a P-256/P-384/P-521
	// key, EdDSA for Ed25519.
	Algorithm string
	// Key is an *rsa.PublicKey (2048 bits or more), an *ecdsa.PublicKey or
	// an ed25519.PublicKey; see [ParsePublicKeyPEM].
	Key crypto.PublicKey
}

// JWKSConfig sets where and how often keys are fetched. The zero value
// (no URL) fetches nothing.
type JWKSConfig struct {
	// URL of the JSON Web Key Set. https, or http to a loopback host.
	URL string
	// RefreshInterval is how often the set is fetched in the background.
	// Default 15 minutes.
	RefreshInterval time.Duration
	// MinRefetchInterval rate-limits the fetches that a token with an
	// unknown kid triggers: at most one per interval, however many such
	// tokens arrive. Default 1 minute.
	MinRefetchInterval time.Duration
	// FetchTimeout bounds one fetch. Default 10 seconds.
	FetchTimeout time.Duration
	// MaxBytes bounds the size of the set. Default 1 MiB.
	MaxBytes int64
	// Algorithms narrows the algorithms accepted for fetched keys. Default:
	// every asymmetric algorithm the key type allows (RS*, PS* for RSA,
	// ES* by curve, EdDSA), or the key's own "alg" when it has one.
	// Symmetric (oct) keys are never taken from a key set.
	Algorithms []string
	// HTTPClient fetches the set. Default: a client of its own, whose idle
	// connections Close closes.
	HTTPClient *http.Client
}

// Config configures a [JWTVerifier]. At least one key source is required:
// Secrets, Keys or JWKS.URL; they may be combined.
type Config struct {
	Secrets []Secret
	Keys    []PublicKey
	JWKS    JWKSConfig

	// Audiences, when set, requires aud to name at least one of them.
	Audiences []string
	// Issuers, when set, requires iss to be one of them.
	Issuers []string
	// Leeway is the clock skew allowed on exp and nbf. Default 0.
	Leeway time.Duration
	// MaxTokenSize is the longest token accepted, in bytes; longer ones are
	// rejected before any parsing. Default 8 KiB.
	MaxTokenSize int
	// DefaultScopes are the scopes of a token that carries neither a
	// policy claim nor any ACL scope. Default none: such a token may do
	// nothing.
	DefaultScopes []string

	// Logger receives key-set fetch failures and rotations. nil discards.
	Logger *slog.Logger
	// Clock judges exp and nbf and paces the key-set refresh; nil means
	// the system clock. Give the gateway the same clock.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	for i := range c.Secrets {
		if c.Secrets[i].Algorithm == "" {
			c.Secrets[i].Algorithm = HS256
		}
	}
	for i := range c.Keys {
		if c.Keys[i].Algorithm == "" {
			if algs, err := algsForKey(c.Keys[i].Key); err == nil {
				c.Keys[i].Algorithm = algs[0]
			}
		}
	}
	if c.MaxTokenSize == 0 {
		c.MaxTokenSize = DefaultMaxTokenSize
	}
	j := &c.JWKS
	if j.RefreshInterval == 0 {
		j.RefreshInterval = DefaultRefreshInterval
	}
	if j.MinRefetchInterval == 0 {
		j.MinRefetchInterval = DefaultMinRefetchInterval
	}
	if j.FetchTimeout == 0 {
		j.FetchTimeout = DefaultFetchTimeout
	}
	if j.MaxBytes == 0 {
		j.MaxBytes = DefaultMaxJWKSBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Clock = clock.Or(c.Clock)
}

// Validate reports every problem of the configuration (after defaults),
// joined with errors.Join; each wraps [ErrInvalid] and names the field.
func (c Config) Validate() error {
	c = c.clone()
	c.setDefaults()
	return c.validate()
}

func (c *Config) validate() error {
	var errs []error
	if len(c.Secrets) == 0 && len(c.Keys) == 0 && c.JWKS.URL == "" {
		errs = append(errs, invalid("Secrets, Keys, JWKS.URL", "no key source: set at least one"))
	}
	ids := map[string]string{}
	seen := func(field, id string) {
		if id == "" {
			return
		}
		if prev, dup := ids[id]; dup {
			errs = append(errs, invalid(field+".ID", "kid %q is also used by %s", id, prev))
			return
		}
		ids[id] = field
	}
	for i, s := range c.Secrets {
		field := fmt.Sprintf("Secrets[%d]", i)
		seen(field, s.ID)
		minLen, ok := hmacMinBytes[s.Algorithm]
		if !ok {
			errs = append(errs, invalid(field+".Algorithm", "%q is not HS256, HS384 or HS512", s.Algorithm))
			continue
		}
		if len(s.Key) < minLen {
			errs = append(errs, invalid(field+".Key", "%d bytes; %s needs at least %d", len(s.Key), s.Algorithm, minLen))
		}
	}
	for i, k := range c.Keys {
		field := fmt.Sprintf("Keys[%d]", i)
		seen(field, k.ID)
		algs, err := algsForKey(k.Key)
		if err != nil {
			errs = append(errs, invalid(field+".Key", "%s", err))
			continue
		}
		if !slices.Contains(algs, k.Algorithm) {
			errs = append(errs, invalid(field+".Algorithm", "%q cannot be used with this key (allowed: %v)", k.Algorithm, algs))
		}
	}
	if c.JWKS.URL != "" {
		if err := checkJWKSURL(c.JWKS.URL); err != nil {
			errs = append(errs, err)
		}
	}
	for i, a := range c.JWKS.Algorithms {
		if !slices.Contains(asymmetricAlgs, a) {
			errs = append(errs, invalid(fmt.Sprintf("JWKS.Algorithms[%d]", i), "%q is not an asymmetric signature algorithm", a))
		}
	}
	for field, d := range map[string]time.Duration{
		"JWKS.RefreshInterval":    c.JWKS.RefreshInterval,
		"JWKS.MinRefetchInterval": c.JWKS.MinRefetchInterval,
		"JWKS.FetchTimeout":       c.JWKS.FetchTimeout,
	} {
		if d < 0 {
			errs = append(errs, invalid(field, "%s is negative", d))
		}
	}
	if c.JWKS.MaxBytes < 0 {
		errs = append(errs, invalid("JWKS.MaxBytes", "%d is negative", c.JWKS.MaxBytes))
	}
	if c.Leeway < 0 {
		errs = append(errs, invalid("Leeway", "%s is negative", c.Leeway))
	}
	if c.MaxTokenSize < 0 {
		errs = append(errs, invalid("MaxTokenSize", "%d is negative", c.MaxTokenSize))
	}
	if _, err := acl.FromScopes(c.DefaultScopes); err != nil {
		errs = append(errs, fmt.Errorf("%w: DefaultScopes: %w", ErrInvalid, err))
	}
	for i, a := range c.Audiences {
		if a == "" {
			errs = append(errs, invalid(fmt.Sprintf("Audiences[%d]", i), "empty"))
		}
	}
	for i, s := range c.Issuers {
		if s == "" {
			errs = append(errs, invalid(fmt.Sprintf("Issuers[%d]", i), "empty"))
		}
	}
	return errors.Join(errs...)
}

func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: JWKS.URL: %w", ErrInvalid, err)
	}
	switch u.Scheme {
	case "https":
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return invalid("JWKS.URL", "%q: plain http is only allowed to a loopback host; use https", raw)
		}
	default:
		return invalid("JWKS.URL", "%q: scheme must be https (or http to a loopback host)", raw)
	}
	if u.Host == "" {
		return invalid("JWKS.URL", "%q has no host", raw)
	}
	return nil
}

// clone copies the slices a caller could change after NewJWTVerifier.
func (c Config) clone() Config {
	c.Secrets = slices.Clone(c.Secrets)
	for i := range c.Secrets {
		c.Secrets[i].Key = slices.Clone(c.Secrets[i].Key)
	}
	c.Keys = slices.Clone(c.Keys)
	c.JWKS.Algorithms = slices.Clone(c.JWKS.Algorithms)
	c.Audiences = slices.Clone(c.Audiences)
	c.Issuers = slices.Clone(c.Issuers)
	c.DefaultScopes = slices.Clone(c.DefaultScopes)
	return c
}
