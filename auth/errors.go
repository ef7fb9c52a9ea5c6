package auth

import (
	"errors"
	"fmt"
)

// ErrInvalidToken is matched (errors.Is) by every rejection of a token:
// each is a [*TokenError] whose Reason is one of the sentinels below.
var ErrInvalidToken = errors.New("auth: invalid token")

// Reasons a token is rejected. Each error returned for a token matches
// [ErrInvalidToken] and exactly one of these.
var (
	// ErrTokenExpired: now is past exp plus the leeway. Distinct so that a
	// client can be told to refresh (the gateway's token_expired).
	ErrTokenExpired = errors.New("auth: token expired")
	// ErrTooLarge: the token is over Config.MaxTokenSize; it was not parsed.
	ErrTooLarge = errors.New("auth: token too large")
	// ErrMalformed: not a compact JWS of three base64url parts, or a header
	// or claims set that is not the JSON it must be.
	ErrMalformed = errors.New("auth: malformed token")
	// ErrAlgorithm: alg is "none", unknown, or not the algorithm pinned for
	// the key (e.g. an HS256 token where only RSA keys are configured).
	ErrAlgorithm = errors.New("auth: algorithm not allowed")
	// ErrUnknownKey: no configured or fetched key has the token's kid.
	ErrUnknownKey = errors.New("auth: unknown key")
	// ErrSignature: the signature does not verify with the key.
	ErrSignature = errors.New("auth: bad signature")
	// ErrMissingClaim: a required claim (exp; iss or aud when configured) is
	// absent.
	ErrMissingClaim = errors.New("auth: missing claim")
	// ErrNotYetValid: nbf is later than now plus the leeway.
	ErrNotYetValid = errors.New("auth: token not yet valid")
	// ErrAudience: aud names none of Config.Audiences.
	ErrAudience = errors.New("auth: audience not accepted")
	// ErrIssuer: iss is not one of Config.Issuers.
	ErrIssuer = errors.New("auth: issuer not accepted")
	// ErrPolicy: the policy or scopes claim does not make a valid policy.
	ErrPolicy = errors.New("auth: bad policy in token")
	// ErrUnknownToken: the token is none of the [StaticTokens].
	ErrUnknownToken = errors.New("auth: unknown token")
)

var (
	// ErrInvalid is wrapped by every error about a bad setting; the
	// message names the field.
	ErrInvalid = errors.New("auth: invalid setting")
	// ErrKeysUnavailable is returned when the key set could not be fetched
	// from the JWKS URL and no earlier copy is cached. It says nothing about
	// the token (HTTP 503, not 401).
	ErrKeysUnavailable = errors.New("auth: signing keys unavailable")
	// ErrNoToken is returned for a request without a bearer token.
	ErrNoToken = errors.New("auth: no bearer token")
	// ErrClosed is returned by Verify after Close.
	ErrClosed = errors.New("auth: verifier closed")
)

// TokenError is the error for a rejected token. Reason is one of the reason
// sentinels (ErrTokenExpired, ErrAlgorithm, ...), Detail says what was
// wrong in words fit for the client (it never holds key material or the
// token), Err is the underlying cause if any. errors.Is matches
// [ErrInvalidToken], Reason and anything in Err's chain.
type TokenError struct {
	Reason error
	Detail string
	Err    error
}

func (e *TokenError) Error() string {
	reason := e.Reason
	if reason == nil {
		reason = ErrInvalidToken
	}
	msg := reason.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrInvalidToken; Unwrap covers the rest.
func (e *TokenError) Is(target error) bool { return target == ErrInvalidToken }

// Unwrap returns the reason and the cause.
func (e *TokenError) Unwrap() []error {
	var errs []error
	if e.Reason != nil {
		errs = append(errs, e.Reason)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

func tokenErr(reason, cause error, format string, args ...any) *TokenError {
	return &TokenError{Reason: reason, Detail: fmt.Sprintf(format, args...), Err: cause}
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
