package dedupe

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by errors about bad arguments; the message
	// names the field.
	ErrInvalid = errors.New("dedupe: invalid argument")
	// ErrNotOwner is returned by Complete when the caller's claim has
	// expired and another owner holds the key (or it is done).
	ErrNotOwner = errors.New("dedupe: claim not held")
	// ErrBusy is returned by a handler wrapper when another delivery of
	// the same id still holds the claim as the lease ends.
	ErrBusy = errors.New("dedupe: another delivery of this id is in progress")
	// ErrDone is wrapped by [TxStore.MarkDone] when the key holds a live
	// mark: another delivery did the work.
	ErrDone = errors.New("dedupe: key already marked")
)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
