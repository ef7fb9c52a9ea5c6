package pgdb

import "errors"

// ErrInvalid is wrapped by every error about a bad setting; the message
// names the field.
var ErrInvalid = errors.New("pgdb: invalid argument")
