package ws

import (
	"context"
	"errors"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
)

// JWTAuthenticator returns the [Authenticator] for JSON Web Tokens: each
// AUTH token (and each HTTP publish bearer token) is verified by v, an
// an [*auth.JWTVerifier] or any [auth.Verifier], and becomes a [Principal]
// with the token's subject, whose Authorizer is the token's [acl.Policy]
// (PUBLISH and SUBSCRIBE refused by it are answered forbidden).
//
// The principal expires at [auth.Principal.Expiry] (exp plus the
// verifier's leeway), the moment from which v refuses the token
// ([auth.ErrTokenExpired]): a token is good on a live connection exactly as
// long as it would still pass AUTH or an HTTP endpoint, and the connection
// is closed with [CloseTokenExpired] then.
//
// Errors: an expired token is answered token_expired, every other
// rejection of the token auth_failed (with the verifier's reason, which
// holds no key material), and signing keys that cannot be fetched (or a
// closed verifier) internal, since the token may well be good: try again
// later. A nil v refuses every token with internal.
func JWTAuthenticator(v auth.Verifier) Authenticator {
	return &jwtAuthenticator{v: v}
}

type jwtAuthenticator struct {
	v auth.Verifier
}

func (a *jwtAuthenticator) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if a.v == nil {
		return nil, newError(CodeInternal, nil, "JWTAuthenticator has no verifier")
	}
	if token == "" {
		return nil, newError(CodeAuthFailed, auth.ErrNoToken, "no token: send AUTH with a JWT")
	}
	p, err := a.v.Verify(ctx, token)
	if err != nil {
		return nil, authError(err)
	}
	if p == nil {
		return nil, newError(CodeInternal, nil, "the verifier returned no principal")
	}
	return &Principal{
		Subject:    p.Subject,
		ExpiresAt:  p.Expiry,
		Authorizer: PolicyAuthorizer(p.Policy),
	}, nil
}

// authError maps an error of an Authenticator to a protocol error. A
// protocol error keeps its code; the errors of the auth package map as
// [JWTAuthenticator] says; any other error is auth_failed, or
// token_expired when it wraps [ErrTokenExpired].
func authError(err error) *Error {
	var pe *Error
	switch {
	case errors.As(err, &pe) && pe.Code != "":
		msg := pe.Msg
		if msg == "" {
			msg = err.Error()
		}
		return newError(pe.Code, err, "%s", msg)
	case errors.Is(err, auth.ErrTokenExpired):
		return newError(CodeTokenExpired, err, "%v", err)
	case errors.Is(err, auth.ErrInvalidToken):
		return newError(CodeAuthFailed, err, "%v", err)
	case errors.Is(err, auth.ErrKeysUnavailable):
		return newError(CodeInternal, err, "tokens cannot be checked now: the signing keys are unavailable; try again later")
	case errors.Is(err, auth.ErrClosed):
		return newError(CodeInternal, err, "tokens cannot be checked now: the verifier is closed")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return newError(CodeInternal, err, "the token check did not finish in time; try again later")
	}
	return newError(CodeAuthFailed, err, "%v", err)
}

// PolicyAuthorizer returns an [Authorizer] that asks p: publish and
// subscribe map to [acl.Publish] and [acl.Subscribe]. A nil policy refuses
// everything. Use it in an Authenticator of your own that gives
// principals ACL policies.
func PolicyAuthorizer(p *acl.Policy) Authorizer {
	return AuthorizerFunc(func(action Action, topic, group string) error {
		return p.Check(acl.Action(action), topic, group)
	})
}
