package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/internal/httpx"
)

// Error codes of the JSON errors written by [WriteError]. They are those of
// the gateway's protocol, so a client sees one vocabulary.
const (
	CodeUnauthorized    = httpx.CodeUnauthorized // no bearer token (401)
	CodeAuthFailed      = "auth_failed"          // the token was refused (401)
	CodeTokenExpired    = "token_expired"        // the token has expired (401)
	CodeForbidden       = "forbidden"            // the policy refuses the request (403)
	CodeAuthUnavailable = "auth_unavailable"     // keys could not be fetched, or the verifier is closed (503)
	CodeBadRequest      = "bad_request"          // a bad topic, group or action (400)
	CodeInternal        = "internal"             // anything else (500)
)

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header (the scheme is case-insensitive). No header, another scheme, an
// empty token or several Authorization headers give [ErrNoToken].
func BearerToken(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", fmt.Errorf("%w: no Authorization header", ErrNoToken)
	case 1:
	default:
		return "", fmt.Errorf("%w: %d Authorization headers", ErrNoToken, len(values))
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: Authorization scheme is not Bearer", ErrNoToken)
	}
	if token = strings.TrimSpace(token); token == "" {
		return "", fmt.Errorf("%w: empty bearer token", ErrNoToken)
	}
	return token, nil
}

// verifyRequest verifies the request's bearer token with v and the
// request's context; a nil v is [OpenAccess]. A request without a bearer
// token is still put to v (with an empty token: OpenAccess takes it); if v
// refuses it, the error is the [ErrNoToken] that says what is missing.
func verifyRequest(v Verifier, r *http.Request) (*Principal, error) {
	if v == nil {
		v = openAccess
	}
	token, noToken := BearerToken(r)
	p, err := v.Verify(r.Context(), token)
	switch {
	case err == nil && p == nil:
		return nil, errors.New("auth: the verifier returned no principal")
	case err == nil:
		return p, nil
	case noToken != nil && !errors.Is(err, ErrKeysUnavailable) && !errors.Is(err, ErrClosed) && r.Context().Err() == nil:
		return nil, noToken
	}
	return nil, err
}

var openAccess = OpenAccess()

// Authenticate returns the principal of r and r with it in its context: the
// principal already there ([Middleware] in front of the handler, or
// [NewContext]) if there is one, else the one v makes of the request's
// bearer token (a nil v is [OpenAccess]). A request without a bearer
// token is still put to v (with an empty token: OpenAccess takes it); if v
// refuses it, the error is the [ErrNoToken] that says what is missing.
// It is how an HTTP endpoint answers 401 before it looks at its parameters
// (400) and checks them against the principal's policy (403).
func Authenticate(v Verifier, r *http.Request) (*http.Request, *Principal, error) {
	if p, ok := PrincipalFromContext(r.Context()); ok {
		return r, p, nil
	}
	p, err := verifyRequest(v, r)
	if err != nil {
		return r, nil, err
	}
	return r.WithContext(NewContext(r.Context(), p)), p, nil
}

// Middleware authenticates every request as [Authenticate] does and passes
// it on with the principal in its context ([PrincipalFromContext]); a
// request without a valid token is answered by [WriteError] (401, or 503
// when keys are unavailable) and goes no further. Handlers then call
// [Authorize] with what the request does.
func Middleware(v Verifier) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r, _, err := Authenticate(v, r)
			if err != nil {
				WriteError(w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

type principalKey struct{}

// NewContext returns a context that carries p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFromContext returns the principal [Middleware] or [NewContext]
// put in ctx.
func PrincipalFromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// Authorize checks action on topic (and group) against the policy of the
// principal in ctx. No principal gives [ErrNoToken]; a refusal wraps
// [acl.ErrForbidden]. Pass the error to [WriteError].
func Authorize(ctx context.Context, action acl.Action, topic, group string) error {
	p, ok := PrincipalFromContext(ctx)
	if !ok {
		return fmt.Errorf("%w: no authenticated principal", ErrNoToken)
	}
	return p.Check(action, topic, group)
}

// ErrorStatus maps an error of this package or of [acl] to an HTTP status
// and an error code:
//
//	ErrNoToken                 401 unauthorized
//	ErrTokenExpired            401 token_expired
//	ErrInvalidToken (others)   401 auth_failed
//	acl.ErrForbidden           403 forbidden
//	acl.ErrInvalid             400 bad_request
//	ErrKeysUnavailable         503 auth_unavailable
//	ErrClosed                  503 auth_unavailable
//	anything else              500 internal
func ErrorStatus(err error) (status int, code string) {
	switch {
	case errors.Is(err, ErrNoToken):
		return http.StatusUnauthorized, CodeUnauthorized
	case errors.Is(err, ErrTokenExpired):
		return http.StatusUnauthorized, CodeTokenExpired
	case errors.Is(err, ErrInvalidToken):
		return http.StatusUnauthorized, CodeAuthFailed
	case errors.Is(err, acl.ErrForbidden):
		return http.StatusForbidden, CodeForbidden
	case errors.Is(err, acl.ErrInvalid):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, ErrKeysUnavailable), errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable, CodeAuthUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

// WriteError answers a request with the status and code of [ErrorStatus]
// and the JSON error body of every HTTP endpoint,
// {"error":{"code":"...","msg":"..."}}. The message is the error's text for the
// client's errors (401, 400, 403: it names the reason, never key material
// or the token) and a generic text otherwise, so that no internal detail
// leaks. A 401 carries a WWW-Authenticate: Bearer challenge (RFC 6750).
func WriteError(w http.ResponseWriter, err error) {
	status, code := ErrorStatus(err)
	msg := err.Error()
	switch status {
	case http.StatusServiceUnavailable:
		msg = "authentication is unavailable; try again later"
	case http.StatusInternalServerError:
		msg = "internal error"
	}
	httpx.WriteError(w, status, code, msg)
}
