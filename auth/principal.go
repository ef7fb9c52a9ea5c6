package auth

import (
	"context"
	"time"

	"github.com/promethean/promlib/acl"
)

// Verifier turns a token into a [Principal]: [JWTVerifier] for JSON Web
// Tokens, [StaticTokens] for shared secrets, [OpenAccess] for none. The
// gateway, HTTP publish, replay and ops all take one. A rejected token is
// an error matching [ErrInvalidToken] ([ErrTokenExpired] when it has
// expired); [ErrKeysUnavailable] and [ErrClosed] say the token could not be
// checked now. The error's text may be sent to the client, so it must not
// hold secrets.
type Verifier interface {
	Verify(ctx context.Context, token string) (*Principal, error)
}

// VerifierFunc adapts a function to [Verifier].
type VerifierFunc func(ctx context.Context, token string) (*Principal, error)

// Verify calls f.
func (f VerifierFunc) Verify(ctx context.Context, token string) (*Principal, error) {
	return f(ctx, token)
}

// Principal is who a verified token speaks for, and what it may do.
type Principal struct {
	// Subject names the principal (the sub claim of a JWT). A connection
	// that re-authenticates must keep its subject.
	Subject string
	// Expiry is the moment from which the token is refused: for a JWT,
	// exp plus the verifier's leeway. The zero time means never. A
	// long-lived connection ends then unless it re-authenticates.
	Expiry time.Time
	// Policy decides every action ([acl.Action]) on every topic. For a JWT
	// it comes from the policy claim, else from the ACL scopes (scopes or
	// scope claim), else from Config.DefaultScopes. A nil policy refuses
	// everything.
	Policy *acl.Policy
	// Scopes are all the scopes of the token, ACL scopes or not, in order.
	Scopes []string
	// Claims are all the claims, decoded from JSON (numbers as float64).
	Claims map[string]any
}

// Check asks the principal's policy; a nil principal is refused.
func (p *Principal) Check(action acl.Action, topic, group string) error {
	if p == nil {
		return (*acl.Policy)(nil).Check(action, topic, group)
	}
	return p.Policy.Check(action, topic, group)
}

// Expired reports whether the principal's token is refused at now.
func (p *Principal) Expired(now time.Time) bool {
	return !p.Expiry.IsZero() && !now.Before(p.Expiry)
}
