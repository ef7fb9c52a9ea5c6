package event

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every error about a bad argument: a bad name,
	// a bad option, a payload that is not JSON. The message names the field.
	ErrInvalid = errors.New("event: invalid argument")
	// ErrClosed is returned by calls on a closed Bus or Subscription.
	ErrClosed = errors.New("event: closed")
	// ErrNotFound is returned when a record, cursor or group does not exist.
	ErrNotFound = errors.New("event: not found")
	// ErrNotInFlight is returned by Ack, Nack and ModAck for a delivery that is
	// not in flight: already settled, never delivered here, or given back when
	// this member lost the partition.
	ErrNotInFlight = errors.New("event: delivery not in flight")
	// ErrStaleAck is returned by Ack, Nack and ModAck that name an attempt
	// whose lease has ended (expired, nacked or given back). It never settles
	// the redelivery that holds the event now.
	ErrStaleAck = errors.New("event: stale ack: the lease of this attempt has ended")
	// ErrGroupActive is returned by SetCursor while the group has
	// subscribers in this Bus.
	ErrGroupActive = errors.New("event: group has active subscribers")
	// ErrStoreFull is returned by a publish that a store's limit refuses
	// (see [MemoryStoreConfig]); the message names the limit. Nothing of
	// the refused publish is stored and nothing stored is evicted.
	ErrStoreFull = errors.New("event: store full")
)

// invalid builds an error that wraps ErrInvalid and names the field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
