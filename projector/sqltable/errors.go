package sqltable

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error about a bad setting; the message
// names the field.
var ErrInvalid = errors.New("sqltable: invalid argument")

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
