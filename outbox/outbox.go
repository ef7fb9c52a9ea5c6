package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/promethean/promlib/event"
)

// Message is what an application adds to the outbox: an event to publish
// once the surrounding transaction commits.
type Message struct {
	// ID becomes the published event's id (default: a new UUIDv7), which
	// makes a republish after a crash a no-op.
	ID      string
	Topic   string
	Key     string
	Headers map[string]string
	Payload json.RawMessage
}

// Status is where a row is in its life.
type Status string

const (
	StatusPending Status = "pending"
	StatusSent    Status = "sent"
	StatusFailed  Status = "failed"
)

// Row is a stored outbox row.
type Row struct {
	Message
	// Seq orders rows: the order in which they were added.
	Seq       uint64
	TS        int64 // added, Unix ms
	Status    Status
	Attempts  int
	LastError string
	// NextAt is when a row that failed may be tried again.
	NextAt time.Time
	// Token is the lease token of the drainer that last marked the row.
	Token int64
	// SentAt is when the row was marked sent; zero until then.
	SentAt time.Time
}

// OrderingKey is the unit of ordering: rows with the same topic and key
// are published in the order they were added.
func (r *Row) OrderingKey() string { return r.Topic + "\x00" + r.Key }

// Store keeps outbox rows and the drainer lease. Implementations must be
// safe for concurrent use by several processes' drainers.
type Store interface {
	// Add stores messages as pending rows. When ctx carries a
	// transaction of the store's database (see
	// [github.com/promethean/promlib/txn.Runner]), the rows are written
	// in it and become visible, to drainers too, when it commits.
	Add(ctx context.Context, msgs ...Message) error
	// AcquireLease makes worker the leader until now+ttl if the lease is
	// free, expired or already its own, and returns the lease's token: a
	// number that grows every time the lease changes hands.
	AcquireLease(ctx context.Context, worker string, ttl time.Duration) (token int64, ok bool, err error)
	// ReleaseLease frees the lease if worker holds it with token.
	ReleaseLease(ctx context.Context, worker string, token int64) error
	// Claim returns up to n due pending rows in Seq order, if token is the
	// current lease's (ErrNotLeader otherwise). A row is due when NextAt <=
	// now; a row is never returned while an earlier pending row of its
	// ordering key is not (so a row waiting for its retry holds back the
	// rows behind it). Claim writes nothing.
	Claim(ctx context.Context, token int64, n int) ([]Row, error)
	// MarkSent marks rows sent and stamps them with token. A row that is no
	// longer pending, or that a drainer with a newer token marked, is left
	// alone and reported as ErrStaleClaim.
	MarkSent(ctx context.Context, token int64, ids ...string) error
	// MarkRetry records a failed attempt of a row, with the same fencing as
	// MarkSent: the row stays pending until r.Next, or becomes failed when
	// r.Final.
	MarkRetry(ctx context.Context, token int64, r Retry) error
	// DeleteSent deletes up to limit rows that were marked sent before
	// before, and returns how many it deleted. Pending and failed rows
	// are never deleted.
	DeleteSent(ctx context.Context, before time.Time, limit int) (int, error)
	// Stats counts rows by status.
	Stats(ctx context.Context) (Stats, error)
}

// Retry is a failed publish attempt of a row, for [Store.MarkRetry].
type Retry struct {
	// ID is the row's id.
	ID string
	// Err is the attempt's error, kept as the row's LastError.
	Err string
	// Next is when the row may be tried again.
	Next time.Time
	// Final marks the row failed for good instead.
	Final bool
}

// Stats counts rows by status.
type Stats struct {
	Pending int64 `json:"pending"`
	Sent    int64 `json:"sent"`
	Failed  int64 `json:"failed"`
}

// NewRow validates m as the Bus will validate its publish (topic, id,
// key and headers, payload: valid UTF-8, one JSON value within
// [event.MaxJSONDepth]), so that a message the drainer could never
// publish is refused at Add, in the caller's transaction, and not failed
// later. It returns m as a pending row added at now, with a new id when m
// has none. Stores call it in Add; the store assigns Seq. Its errors wrap
// [ErrInvalid] and the event package's error.
func NewRow(m Message, now time.Time) (Row, error) {
	var errs []error
	if err := event.ValidateTopic(m.Topic); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, err))
	}
	o := event.PublishOptions{ID: m.ID, Key: m.Key, Headers: m.Headers}
	if err := o.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, err))
	}
	if err := event.ValidatePayload(m.Payload); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, err))
	}
	if err := errors.Join(errs...); err != nil {
		return Row{}, err
	}
	if m.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return Row{}, fmt.Errorf("outbox: new id: %w", err)
		}
		m.ID = id.String()
	}
	return Row{Message: m, TS: now.UnixMilli(), Status: StatusPending}, nil
}
