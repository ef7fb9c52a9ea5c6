package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/promethean/promlib/auth"
)

// Authentication modes of the hub.
const (
	modeJWT    = "jwt"    // JWT_SECRET and/or JWT_JWKS_URL
	modeStatic = "static" // WS_TOKEN
	modeOpen   = "open"   // nothing set
)

// hubAuth is how the hub authenticates: one auth.Verifier for every entry
// point (the gateway's AUTH frames, HTTP publish, replay, export, latest
// and ops), each checking requests with the principal's acl policy.
type hubAuth struct {
	mode     string
	verifier auth.Verifier
	close    func()
}

// jwtEnv are the variables that select JWT mode.
var jwtEnv = []string{"JWT_SECRET", "JWT_JWKS_URL", "JWT_AUD", "JWT_ISS"}

// setupAuth reads the environment: JWT_* select JWT mode, WS_TOKEN the
// static-token mode, neither open access. Both at once is refused: which
// one a client must use would be a guess.
func setupAuth(getenv func(string) string, leeway time.Duration, log *slog.Logger) (*hubAuth, error) {
	var set []string
	for _, k := range jwtEnv {
		if getenv(k) != "" {
			set = append(set, k)
		}
	}
	token := getenv("WS_TOKEN")
	switch {
	case len(set) > 0 && token != "":
		return nil, fmt.Errorf("WS_TOKEN and %s are both set: use either the static token (WS_TOKEN) or JWTs (JWT_*), not both", strings.Join(set, ", "))
	case len(set) > 0:
		return setupJWT(getenv, leeway, log)
	case token != "":
		log.Info("auth: static token (WS_TOKEN); every client may publish and subscribe to everything")
		return &hubAuth{
			mode:     modeStatic,
			verifier: auth.StaticTokens(token),
			close:    func() {},
		}, nil
	}
	log.Warn("!!! neither WS_TOKEN nor JWT_SECRET/JWT_JWKS_URL is set: the hub accepts ANY client without authentication; set one outside a trusted network !!!")
	return &hubAuth{
		mode:     modeOpen,
		verifier: auth.OpenAccess(),
		close:    func() {},
	}, nil
}

func setupJWT(getenv func(string) string, leeway time.Duration, log *slog.Logger) (*hubAuth, error) {
	secret, jwksURL := getenv("JWT_SECRET"), getenv("JWT_JWKS_URL")
	if secret == "" && jwksURL == "" {
		return nil, errors.New("JWT_AUD and JWT_ISS need a key: set JWT_SECRET or JWT_JWKS_URL")
	}
	cfg := auth.Config{
		JWKS:      auth.JWKSConfig{URL: jwksURL},
		Audiences: list(getenv("JWT_AUD")),
		Issuers:   list(getenv("JWT_ISS")),
		Leeway:    leeway,
		Logger:    log,
	}
	if secret != "" {
		cfg.Secrets = []auth.Secret{{Key: []byte(secret)}}
	}
	v, err := auth.NewJWTVerifier(cfg)
	if err != nil {
		// The fields are auth.Config's; say which variables they are.
		return nil, fmt.Errorf("JWT settings (JWT_SECRET is Secrets[0].Key, JWT_JWKS_URL is JWKS.URL, JWT_AUD Audiences, JWT_ISS Issuers, -jwt-leeway Leeway): %w", err)
	}
	log.Info("auth: JWT", "hmac_secret", secret != "", "jwks_url", jwksURL,
		"audiences", cfg.Audiences, "issuers", cfg.Issuers, "leeway", leeway)
	if len(cfg.Audiences) == 0 {
		log.Warn("auth: JWT_AUD is not set: tokens issued for any audience are accepted")
	}
	return &hubAuth{
		mode:     modeJWT,
		verifier: v,
		close:    func() { _ = v.Close() },
	}, nil
}

// list splits a comma-separated value, dropping empty items.
func list(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
