package ws

import (
	"context"
	"crypto/subtle"
	"time"
)

// Action is what a principal asks to do with a topic.
type Action string

// Actions checked by [Principal.Authorize].
const (
	ActionPublish   Action = "publish"
	ActionSubscribe Action = "subscribe"
)

// Authorizer decides whether a principal may act on a topic (and group, for
// subscribe; empty for publish). A refusal is answered with ERR forbidden
// and the error's text.
type Authorizer interface {
	Authorize(action Action, topic, group string) error
}

// AuthorizerFunc adapts a function to [Authorizer].
type AuthorizerFunc func(action Action, topic, group string) error

// Authorize calls f.
func (f AuthorizerFunc) Authorize(action Action, topic, group string) error {
	return f(action, topic, group)
}

// Principal is who a connection is, once authenticated.
type Principal struct {
	// Subject names the principal. A re-AUTH must give the same subject:
	// a connection never changes whom it speaks for.
	Subject string
	// ExpiresAt is when the token ends; the zero time means never. From
	// then on (by [Config.Clock]) the connection gets no EVENT and no frame
	// but AUTH is served; without a refreshing AUTH it is closed with
	// [CloseTokenExpired].
	ExpiresAt time.Time
	// Authorizer checks publish and subscribe; nil allows everything.
	Authorizer Authorizer
}

// expired reports whether the principal's token has ended at now.
func (p *Principal) expired(now time.Time) bool {
	return !p.ExpiresAt.IsZero() && !now.Before(p.ExpiresAt)
}

// Authorize asks the principal's Authorizer, if it has one.
func (p *Principal) Authorize(action Action, topic, group string) error {
	if p == nil || p.Authorizer == nil {
		return nil
	}
	return p.Authorizer.Authorize(action, topic, group)
}

// Authenticator turns the token of an AUTH frame (or of an HTTP
// Authorization header) into a principal. An error that is (or wraps) a
// protocol [*Error] is answered with its code; an error wrapping
// [auth.ErrTokenExpired] with token_expired, one wrapping
// [auth.ErrKeysUnavailable] with internal; any other error with
// auth_failed. The error's text is sent to the client, so it must not hold
// secrets. [JWTAuthenticator] verifies JWTs with the auth package.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// AuthenticatorFunc adapts a function to [Authenticator].
type AuthenticatorFunc func(ctx context.Context, token string) (*Principal, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(ctx context.Context, token string) (*Principal, error) {
	return f(ctx, token)
}

// StaticTokens accepts any of the given tokens (compared in constant time)
// and gives a principal that may do everything. It is the built-in
// authenticator for a shared secret such as the hub's WS_TOKEN.
func StaticTokens(tokens ...string) Authenticator {
	ts := make([][]byte, 0, len(tokens))
	for _, t := range tokens {
		if t != "" {
			ts = append(ts, []byte(t))
		}
	}
	return AuthenticatorFunc(func(_ context.Context, token string) (*Principal, error) {
		ok := 0
		for _, t := range ts {
			ok |= subtle.ConstantTimeCompare(t, []byte(token))
		}
		if ok == 0 || len(ts) == 0 {
			return nil, &Error{Code: CodeAuthFailed, Msg: "unknown token"}
		}
		return &Principal{Subject: "static"}, nil
	})
}

// OpenAccess accepts every token, including none, and gives a principal
// that may do everything. Clients still send AUTH first, as the protocol
// says; use it only where the network is trusted.
func OpenAccess() Authenticator {
	return AuthenticatorFunc(func(context.Context, string) (*Principal, error) {
		return &Principal{Subject: "anonymous"}, nil
	})
}
