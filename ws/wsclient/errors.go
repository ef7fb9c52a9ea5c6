package wsclient

import (
	"errors"
	"fmt"

	"github.com/promethean/promlib/internal/wsframe"
)

// Code is an error code of the protocol, received in ERR frames. It is the
// same type as ws.Code.
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

// Error is a protocol error: the code and message of the server's ERR
// answer, which the client returns. Its fields are Code (a [Code]) and
// Msg (the message, for people); Error() gives "ws: <code>: <msg>". It is
// the same type as ws.Error, so an error of either package matches the
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

// PublishResult is the stored event's id and seq. It is the same type as
// ws.PublishResult.
type PublishResult = wsframe.PublishResult

var (
	// ErrInvalid is wrapped by every error about a bad option or argument;
	// the message names the field.
	ErrInvalid = errors.New("wsclient: invalid argument")
	// ErrClosed is returned by calls on a closed Client.
	ErrClosed = errors.New("wsclient: closed")
	// ErrDisconnected is returned by a call whose connection was lost
	// before the answer came, when the client does not reconnect.
	ErrDisconnected = errors.New("wsclient: disconnected")
)

// CloseError is how the server closed a connection: its WebSocket close
// code and reason (docs/PROTOCOL.md lists them: 1001 the server shuts
// down or its bus closed, 1008 write timeout, 4401 token expired, ...).
// The ErrDisconnected errors of a client that does not reconnect wrap it
// when the server sent one; find it with errors.As.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("wsclient: the server closed the connection with %d %q", e.Code, e.Reason)
}

// disconnected is ErrDisconnected, wrapping how the server closed the
// connection when it said.
func disconnected(ce *CloseError) error {
	if ce == nil {
		return ErrDisconnected
	}
	return fmt.Errorf("%w: %w", ErrDisconnected, ce)
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
