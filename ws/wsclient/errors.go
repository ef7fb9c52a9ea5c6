package wsclient

import (
	"errors"
	"fmt"
)

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
// code and reason (package ws/wsproto names the codes: 1001
// wsproto.CloseGoingAway the server shuts down or its bus closed, 1008
// wsproto.CloseWriteTimeout, 4401 wsproto.CloseTokenExpired, ...).
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
