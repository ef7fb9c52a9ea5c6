package acl

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every error about a bad pattern, rule, scope,
	// policy document or argument; the message names the field or value.
	ErrInvalid = errors.New("acl: invalid")
	// ErrForbidden is wrapped by the error of [Policy.Check] when the policy
	// refuses the request; the message names the action and the topic.
	ErrForbidden = errors.New("acl: forbidden")
)

// invalid builds an error that wraps ErrInvalid and names the field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
