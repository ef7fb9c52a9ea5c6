package outbox

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by errors about bad arguments; the message
	// names the field.
	ErrInvalid = errors.New("outbox: invalid argument")
	// ErrStaleClaim is returned when a drainer marks rows with a token that
	// is no longer current: its lease ended and another drainer took over.
	ErrStaleClaim = errors.New("outbox: stale claim: another drainer holds the outbox")
	// ErrNotLeader is returned by Claim when the token is not the current
	// leader's.
	ErrNotLeader = errors.New("outbox: not the leader")
)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
