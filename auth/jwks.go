package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/promethean/promlib/clock"
)

// jwksCache holds the keys fetched from a JWKS URL. One goroutine (run)
// does every fetch: at start, every RefreshInterval, and when a token with
// an unknown kid asks for one, which is granted at most once per
// MinRefetchInterval. Callers wait for a fetch under way rather than start
// another.
type jwksCache struct {
	cfg    JWKSConfig
	client *http.Client
	owned  bool // client is ours: close its idle connections at the end
	clock  clock.Clock
	log    *slog.Logger

	wake chan struct{} // cap 1: a fetch has been claimed for run to do

	mu          sync.Mutex
	keys        []verifyKey
	loaded      bool  // a fetch has succeeded once
	lastErr     error // of the last fetch, nil if it succeeded
	attempted   bool
	lastAttempt time.Time
	inflight    chan struct{} // closed when the claimed fetch ends; nil if none
	closed      bool
	fetches     int // fetches started, for tests
}

func newJWKSCache(cfg JWKSConfig, clk clock.Clock, log *slog.Logger) *jwksCache {
	c := &jwksCache{cfg: cfg, client: cfg.HTTPClient, clock: clk, log: log, wake: make(chan struct{}, 1)}
	if c.client == nil {
		c.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		c.owned = true
	}
	return c
}

// run fetches until ctx ends. It is the only goroutine of the cache.
func (c *jwksCache) run(ctx context.Context) {
	defer func() {
		c.mu.Lock()
		c.closed = true
		if c.inflight != nil { // claimed by a caller, never fetched
			c.lastErr = ErrClosed
			close(c.inflight)
			c.inflight = nil
		}
		c.mu.Unlock()
		if c.owned {
			c.client.CloseIdleConnections()
		}
	}()
	if _, mine := c.claim(true); mine {
		c.fetch(ctx)
	}
	tick := c.clock.NewTimer(c.cfg.RefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
			c.fetch(ctx)
		case <-tick.C():
			if _, mine := c.claim(true); mine {
				c.fetch(ctx)
			}
			tick.Reset(c.cfg.RefreshInterval)
		}
	}
}

// claim reserves the next fetch. It returns the channel that is closed when
// the fetch ends: the one under way if there is one (mine false), else a
// new one (mine true), unless the rate limit refuses (nil). force skips the
// rate limit (scheduled refreshes).
func (c *jwksCache) claim(force bool) (done chan struct{}, mine bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight != nil {
		return c.inflight, false
	}
	if c.closed {
		return nil, false
	}
	now := c.clock.Now()
	if !force && c.attempted && now.Sub(c.lastAttempt) < c.cfg.MinRefetchInterval {
		return nil, false
	}
	c.inflight = make(chan struct{})
	c.attempted, c.lastAttempt = true, now
	c.fetches++
	return c.inflight, true
}

// fetch runs the claimed fetch and publishes its result.
func (c *jwksCache) fetch(ctx context.Context) {
	keys, err := c.get(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight == nil {
		return
	}
	if err != nil {
		c.lastErr = err
		c.log.Warn("auth: JWKS fetch failed; keeping the keys fetched before", "url", c.cfg.URL, "err", err, "cached_keys", len(c.keys))
	} else {
		if !slices.EqualFunc(c.keys, keys, func(a, b verifyKey) bool { return a.id == b.id }) {
			c.log.Info("auth: JWKS keys changed", "url", c.cfg.URL, "keys", len(keys))
		}
		c.keys, c.loaded, c.lastErr = keys, true, nil
	}
	close(c.inflight)
	c.inflight = nil
}

// get does one HTTP fetch and converts the set.
func (c *jwksCache) get(ctx context.Context) ([]verifyKey, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %s", c.cfg.URL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", c.cfg.URL, err)
	}
	if int64(len(body)) > c.cfg.MaxBytes {
		return nil, fmt.Errorf("GET %s: key set larger than %d bytes", c.cfg.URL, c.cfg.MaxBytes)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", c.cfg.URL, err)
	}
	keys := make([]verifyKey, 0, set.Len())
	for i := 0; i < set.Len(); i++ {
		k, _ := set.Key(i)
		vk, err := c.convert(k)
		if err != nil {
			c.log.Warn("auth: JWKS key skipped", "url", c.cfg.URL, "kid", k.KeyID(), "reason", err)
			continue
		}
		keys = append(keys, vk)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("GET %s: no usable signature key in the set (%d keys)", c.cfg.URL, set.Len())
	}
	return keys, nil
}

// convert pins a JWK to the algorithms it may verify.
func (c *jwksCache) convert(k jwk.Key) (verifyKey, error) {
	if use := k.KeyUsage(); use != "" && use != "sig" {
		return verifyKey{}, fmt.Errorf("use %q is not sig", use)
	}
	pub, err := k.PublicKey()
	if err != nil {
		return verifyKey{}, err
	}
	var raw any
	if err := pub.Raw(&raw); err != nil {
		return verifyKey{}, err
	}
	switch r := raw.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
	case ed25519.PublicKey:
	case []byte:
		return verifyKey{}, fmt.Errorf("symmetric keys are never taken from a key set")
	default:
		return verifyKey{}, fmt.Errorf("unsupported key type %T", r)
	}
	algs, err := algsForKey(raw)
	if err != nil {
		return verifyKey{}, err
	}
	if a := k.Algorithm().String(); a != "" {
		if !slices.Contains(algs, a) {
			return verifyKey{}, fmt.Errorf("alg %q does not fit the key", a)
		}
		algs = []string{a}
	}
	if len(c.cfg.Algorithms) > 0 {
		algs = slices.DeleteFunc(slices.Clone(algs), func(a string) bool { return !slices.Contains(c.cfg.Algorithms, a) })
		if len(algs) == 0 {
			return verifyKey{}, fmt.Errorf("no algorithm of the key is in JWKS.Algorithms")
		}
	}
	return verifyKey{id: k.KeyID(), algs: algs, key: raw, source: "JWKS"}, nil
}

// lookup returns the fetched keys with this kid (every fetched key when kid
// is empty). A miss asks for a refetch, subject to the rate limit, and
// waits for it. Before any fetch has succeeded, it waits for the one under
// way and returns ErrKeysUnavailable if that fails.
func (c *jwksCache) lookup(ctx context.Context, kid string) ([]verifyKey, error) {
	if keys, ok := c.find(kid); ok {
		return keys, nil
	}
	done, mine := c.claim(false)
	if done != nil {
		if mine {
			select {
			case c.wake <- struct{}{}:
			default: // run has a wake pending already
			}
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	keys, _ := c.find(kid)
	c.mu.Lock()
	loaded, lastErr, closed := c.loaded, c.lastErr, c.closed
	c.mu.Unlock()
	switch {
	case closed && !loaded:
		return nil, ErrClosed
	case !loaded && lastErr != nil:
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, lastErr)
	case !loaded:
		return nil, ErrKeysUnavailable
	}
	return keys, nil
}

// find returns the cached keys for kid; ok is false on a miss (or before
// the first successful fetch).
func (c *jwksCache) find(kid string) (keys []verifyKey, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded {
		return nil, false
	}
	if kid == "" {
		return c.keys, true
	}
	for i := range c.keys {
		if c.keys[i].id == kid {
			keys = append(keys, c.keys[i])
		}
	}
	return keys, len(keys) > 0
}
