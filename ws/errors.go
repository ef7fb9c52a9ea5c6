package ws

import (
	"errors"
	"fmt"

	"github.com/promethean/promlib/internal/wsframe"
)

// Code is an error code of the protocol, sent in ERR frames. It is the
// same type as wsclient.Code.
type Code = wsframe.Code

// The error codes of docs/PROTOCOL.md.
const (
	CodeBadJSON           = wsframe.CodeBadJSON           // the frame is not JSON
	CodeBadFrame          = wsframe.CodeBadFrame          // missing or ill-typed field, unknown op
	CodeUnauthorized      = wsframe.CodeUnauthorized      // no AUTH yet
	CodeAuthFailed        = wsframe.CodeAuthFailed        // the token was refused
	CodeTokenExpired      = wsframe.CodeTokenExpired      // the token has expired
	CodeForbidden         = wsframe.CodeForbidden         // the principal may not do this
	CodeRateLimited       = wsframe.CodeRateLimited       // a rate limit or a count limit was hit
	CodeTooLarge          = wsframe.CodeTooLarge          // the payload is over the limit
	CodeAlreadySubscribed = wsframe.CodeAlreadySubscribed // SUBSCRIBE of a (topic, group) held here
	CodeNotSubscribed     = wsframe.CodeNotSubscribed     // op on a (topic, group) not held here
	CodeUnknownID         = wsframe.CodeUnknownID         // MODACK of an id not in flight
	CodePublishFailed     = wsframe.CodePublishFailed     // the store refused the publish
	CodeAckFailed         = wsframe.CodeAckFailed         // the ack did not settle the event
	CodeSchemaInvalid     = wsframe.CodeSchemaInvalid     // the payload does not match the topic's schema
	CodeInternal          = wsframe.CodeInternal          // anything else
)

// Error is a protocol error: the code and message of an ERR frame, which
// the gateway answers with. Its fields are Code (a [Code]) and Msg (the
// message, for people); Error() gives "ws: <code>: <msg>". It is the
// same type as wsclient.Error, so an error of either package matches the
// Err* sentinels of both with errors.Is (by code).
type Error = wsframe.Error

// Sentinels, one per code, for errors.Is.
var (
	ErrBadJSON           = wsframe.ErrBadJSON
	ErrBadFrame          = wsframe.ErrBadFrame
	ErrUnauthorized      = wsframe.ErrUnauthorized
	ErrAuthFailed        = wsframe.ErrAuthFailed
	ErrTokenExpired      = wsframe.ErrTokenExpired
	ErrForbidden         = wsframe.ErrForbidden
	ErrRateLimited       = wsframe.ErrRateLimited
	ErrTooLarge          = wsframe.ErrTooLarge
	ErrAlreadySubscribed = wsframe.ErrAlreadySubscribed
	ErrNotSubscribed     = wsframe.ErrNotSubscribed
	ErrUnknownID         = wsframe.ErrUnknownID
	ErrPublishFailed     = wsframe.ErrPublishFailed
	ErrAckFailed         = wsframe.ErrAckFailed
	ErrSchemaInvalid     = wsframe.ErrSchemaInvalid
	ErrInternal          = wsframe.ErrInternal
)

// Ops of the protocol, as [Observer.Handled] reports them.
const (
	OpAuth        = wsframe.OpAuth
	OpPublish     = wsframe.OpPublish
	OpSubscribe   = wsframe.OpSubscribe
	OpUnsubscribe = wsframe.OpUnsubscribe
	OpAck         = wsframe.OpAck
	OpNack        = wsframe.OpNack
	OpModAck      = wsframe.OpModAck
	OpPause       = wsframe.OpPause
	OpResume      = wsframe.OpResume
)

// PublishResult is the answer of a successful HTTP publish: the stored
// event's id and seq. It is the same type as wsclient.PublishResult.
type PublishResult = wsframe.PublishResult

// SchemaViolation is implemented by the error of a publish interceptor
// that refuses a payload for not matching the topic's schema (the schema
// package's ValidationError): the gateway answers it ERR schema_invalid
// (HTTP 422) with the message `at "<JSON pointer>": <reason>`.
type SchemaViolation interface {
	error
	SchemaViolation() (pointer, reason string)
}

// ErrInvalid is wrapped by every error about a bad setting or argument;
// the message names the field.
var ErrInvalid = errors.New("ws: invalid argument")

func newError(code Code, cause error, format string, args ...any) *Error {
	return wsframe.NewError(code, cause, format, args...)
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

func truncate(s string, n int) string { return wsframe.Truncate(s, n) }
