package compaction

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by errors about bad arguments; the message names
	// the field.
	ErrInvalid = errors.New("compaction: invalid argument")
	// ErrNotSupported is returned when the bus's store lacks a capability
	// a feature needs (latest-by-key, or pruning).
	ErrNotSupported = errors.New("compaction: store does not support it")
)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
