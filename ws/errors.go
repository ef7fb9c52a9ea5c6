package ws

import (
	"errors"
	"fmt"

	"github.com/promethean/promlib/ws/internal/wsframe"
)

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

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

func truncate(s string, n int) string { return wsframe.Truncate(s, n) }
