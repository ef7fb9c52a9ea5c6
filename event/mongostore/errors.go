package mongostore

import "errors"

var (
	// ErrClosed is returned by calls on a closed Store.
	ErrClosed = errors.New("mongostore: closed")
	// ErrUnreachable is wrapped by the error of [Connect] when the server
	// does not answer within Config.ConnectTimeout.
	ErrUnreachable = errors.New("mongostore: server unreachable")
	// ErrBadDocument is wrapped by errors about a stored document that does
	// not decode into a record. The message names the field.
	ErrBadDocument = errors.New("mongostore: document does not decode")
)
