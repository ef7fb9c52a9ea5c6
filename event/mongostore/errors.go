package mongostore

import "errors"

var (
	// ErrClosed is returned by calls on a closed Store.
	ErrClosed = errors.New("mongostore: closed")
	// ErrUnreachable is wrapped by the error of [Connect] when the server
	// does not answer within Config.ConnectTimeout.
	ErrUnreachable = errors.New("mongostore: server unreachable")
	// ErrNoIndexes is returned by Append when the events collection lacks
	// the unique indexes seq assignment and idempotency rest on: call
	// [Store.EnsureIndexes].
	ErrNoIndexes = errors.New("mongostore: the events collection lacks its unique indexes (run EnsureIndexes)")
	// ErrBadDocument is wrapped by errors about a stored document that does
	// not decode into a record. The message names the field.
	ErrBadDocument = errors.New("mongostore: document does not decode")
)
