package auth

import (
	"context"
	"crypto/subtle"

	"github.com/promethean/promlib/acl"
)

// StaticTokens returns the [Verifier] of shared secrets: it accepts any of
// tokens (compared in constant time) and gives a principal, subject
// "static", that may do everything ([acl.AllowEverything]) and never expires.
// Empty tokens are ignored; with none, every token is refused. Any other
// token is refused with [ErrUnknownToken].
func StaticTokens(tokens ...string) Verifier {
	ts := make([][]byte, 0, len(tokens))
	for _, t := range tokens {
		if t != "" {
			ts = append(ts, []byte(t))
		}
	}
	policy := acl.AllowEverything()
	return VerifierFunc(func(_ context.Context, token string) (*Principal, error) {
		ok := 0
		for _, t := range ts {
			ok |= subtle.ConstantTimeCompare(t, []byte(token))
		}
		if ok == 0 || len(ts) == 0 {
			return nil, &TokenError{Reason: ErrUnknownToken}
		}
		return &Principal{Subject: "static", Policy: policy}, nil
	})
}

// OpenAccess returns the [Verifier] that accepts every token, including
// none, and gives a principal, subject "anonymous", that may do everything.
// Use it only where the network is trusted. A nil Verifier in the Config of
// an HTTP endpoint means the same.
func OpenAccess() Verifier {
	policy := acl.AllowEverything()
	return VerifierFunc(func(context.Context, string) (*Principal, error) {
		return &Principal{Subject: "anonymous", Policy: policy}, nil
	})
}
