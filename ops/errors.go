package ops

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by errors about bad arguments (a bad query
	// parameter, a bad Config field); the message names the field.
	ErrInvalid = errors.New("ops: invalid argument")
	// ErrNotFound is returned when a group has no cursor on a topic or a
	// key has no record.
	ErrNotFound = errors.New("ops: not found")
	// ErrNotSupported is returned when the store lacks what a request
	// needs, such as [event.KeyStore] for /ops/latest.
	ErrNotSupported = errors.New("ops: not supported by the store")
)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
