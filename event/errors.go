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
	// ErrLeaseLost is returned by a fenced cursor commit or group-state
	// write (see [Fence]) whose lease is no longer live: it expired, was
	// released, or another member holds the partition now. Nothing was
	// written.
	ErrLeaseLost = errors.New("event: partition lease lost")
	// ErrGroupActive is returned by an operation that needs a group
	// without live members (ResetCursor and DeleteGroup unless forced,
	// UpdateGroup of KeyOrdered) while it has some, in any process; the
	// message names them.
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

// RecordErrors is the error of an append that stored some of its records
// and refused others, one by one. Errs holds one error per record of the
// append, nil for each record stored; the append's result then holds one
// record per input, the stored ones set. errors.Is and errors.As see every
// record's error.
type RecordErrors struct {
	Errs []error
}

func (e *RecordErrors) Error() string {
	n, first := 0, -1
	for i, err := range e.Errs {
		if err != nil {
			n++
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return "event: no record refused"
	}
	return fmt.Sprintf("event: %d of %d records refused; record %d: %v", n, len(e.Errs), first, e.Errs[first])
}

// Unwrap returns the errors of the refused records.
func (e *RecordErrors) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// FenceError returns the error of a fenced write to p whose lease f is no
// longer live, as every store gives it: it wraps [ErrLeaseLost] and names
// the partition, the member and the token.
func FenceError(p PartitionRef, f Fence) error {
	return fmt.Errorf("%w: %q/%q partition %d is no longer leased to %q with token %d",
		ErrLeaseLost, p.Topic, p.Group, p.Partition, f.Member, f.Token)
}
