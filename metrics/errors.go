package metrics

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by errors about a bad [Config]; the message names
// the field.
var ErrInvalid = errors.New("metrics: invalid argument")

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
