package wsproto

import "fmt"

// Code is an error code of the protocol: the code of an ERR frame, and of
// the JSON error body of HTTP publish.
type Code string

// The error codes of docs/PROTOCOL.md.
const (
	CodeBadJSON           Code = "bad_json"           // the frame is not JSON
	CodeBadFrame          Code = "bad_frame"          // missing or ill-typed field, unknown op
	CodeUnauthorized      Code = "unauthorized"       // no AUTH yet
	CodeAuthFailed        Code = "auth_failed"        // the token was refused
	CodeTokenExpired      Code = "token_expired"      // the token has expired
	CodeForbidden         Code = "forbidden"          // the principal may not do this
	CodeRateLimited       Code = "rate_limited"       // a rate limit or a count limit was hit
	CodeTooLarge          Code = "too_large"          // the payload is over the limit
	CodeAlreadySubscribed Code = "already_subscribed" // SUBSCRIBE of a (topic, group) held here
	CodeNotSubscribed     Code = "not_subscribed"     // op on a (topic, group) not held here
	CodeUnknownID         Code = "unknown_id"         // MODACK of an id not in flight
	CodePublishFailed     Code = "publish_failed"     // the store refused the publish
	CodeAckFailed         Code = "ack_failed"         // the ack did not settle the event
	CodeSchemaInvalid     Code = "schema_invalid"     // the payload does not match the topic's schema
	CodeInternal          Code = "internal"           // anything else
)

// Error is a protocol error: the code and message of an ERR frame. The
// gateway answers with it; the client returns it for an ERR answer.
// Error() gives "ws: <code>: <msg>". errors.Is matches it against the
// Err* sentinels of this package by code.
type Error struct {
	Code Code
	Msg  string // for people
	err  error
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return "ws: " + string(e.Code)
	}
	return "ws: " + string(e.Code) + ": " + e.Msg
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Unwrap returns the cause, if the error has one.
func (e *Error) Unwrap() error { return e.err }

// NewError returns a protocol error of code whose message is format
// applied to args; cause, if not nil, is what Unwrap returns.
func NewError(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), err: cause}
}

// Sentinels, one per code, for errors.Is.
var (
	ErrBadJSON           = &Error{Code: CodeBadJSON}
	ErrBadFrame          = &Error{Code: CodeBadFrame}
	ErrUnauthorized      = &Error{Code: CodeUnauthorized}
	ErrAuthFailed        = &Error{Code: CodeAuthFailed}
	ErrTokenExpired      = &Error{Code: CodeTokenExpired}
	ErrForbidden         = &Error{Code: CodeForbidden}
	ErrRateLimited       = &Error{Code: CodeRateLimited}
	ErrTooLarge          = &Error{Code: CodeTooLarge}
	ErrAlreadySubscribed = &Error{Code: CodeAlreadySubscribed}
	ErrNotSubscribed     = &Error{Code: CodeNotSubscribed}
	ErrUnknownID         = &Error{Code: CodeUnknownID}
	ErrPublishFailed     = &Error{Code: CodePublishFailed}
	ErrAckFailed         = &Error{Code: CodeAckFailed}
	ErrSchemaInvalid     = &Error{Code: CodeSchemaInvalid}
	ErrInternal          = &Error{Code: CodeInternal}
)
