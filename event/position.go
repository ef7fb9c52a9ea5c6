package event

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Position is a place in a topic: where a new group starts
// ([GroupConfig].Start) and where [Bus.ResetCursor] moves a group. The
// zero Position is the latest (the head of the topic).
type Position struct {
	// Kind is which position: StartLatest, StartEarliest, StartSeq,
	// StartTS or StartAfterID.
	Kind StartPosition
	// Seq is the first seq delivered, for StartSeq.
	Seq uint64
	// TS is a Unix ms, for StartTS: delivery begins at the first record,
	// in seq order, with ts >= TS.
	TS int64
	// ID is a record id, for StartAfterID: delivery begins after it.
	ID string
}

// Latest is the head of a topic: only records published after it.
func Latest() Position { return Position{} }

// Earliest is the beginning of a topic.
func Earliest() Position { return Position{Kind: StartEarliest} }

// AtSeq is the record with the given seq (delivered first).
func AtSeq(seq uint64) Position { return Position{Kind: StartSeq, Seq: seq} }

// AtTS is the first record, in seq order, with ts >= ms.
func AtTS(ms int64) Position { return Position{Kind: StartTS, TS: ms} }

// AfterRecord is just after the record with the given id.
func AfterRecord(id string) Position { return Position{Kind: StartAfterID, ID: id} }

// IsZero reports whether p is the zero Position (the latest, asked by
// nobody).
func (p Position) IsZero() bool { return p == Position{} }

// String returns p's text form: "latest", "earliest", "seq:N", "ts:MS"
// or "afterId:ID", as ParsePosition reads it.
func (p Position) String() string {
	switch p.Kind {
	case StartSeq:
		return "seq:" + strconv.FormatUint(p.Seq, 10)
	case StartTS:
		return "ts:" + strconv.FormatInt(p.TS, 10)
	case StartAfterID:
		return "afterId:" + p.ID
	}
	return p.Kind.String()
}

// ParsePosition reads the text form of a Position: latest (or ""),
// earliest, seq:N, ts:MS (Unix ms) or afterId:ID.
func ParsePosition(s string) (Position, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	k, err := ParseStartPosition(kind)
	if err != nil {
		return Position{}, invalid("position", "%q: want latest, earliest, seq:N, ts:MS or afterId:ID", s)
	}
	p := Position{Kind: k}
	switch k {
	case StartLatest, StartEarliest:
		if hasArg {
			return Position{}, invalid("position", "%q: %s takes no argument", s, kind)
		}
	case StartSeq:
		if p.Seq, err = strconv.ParseUint(arg, 10, 64); err != nil {
			return Position{}, invalid("position", "%q: the seq is not a number", s)
		}
	case StartTS:
		if p.TS, err = strconv.ParseInt(arg, 10, 64); err != nil {
			return Position{}, invalid("position", "%q: the ts is not a number of milliseconds", s)
		}
	case StartAfterID:
		p.ID = arg
	}
	return p, p.Validate()
}

// MarshalText implements encoding.TextMarshaler with String's form.
func (p Position) MarshalText() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParsePosition.
func (p *Position) UnmarshalText(b []byte) error {
	v, err := ParsePosition(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Validate reports what is wrong with p, naming the field.
func (p Position) Validate() error {
	switch p.Kind {
	case StartLatest, StartEarliest:
		if p.Seq != 0 || p.TS != 0 || p.ID != "" {
			return invalid("position", "%s takes no seq, ts or id", p.Kind)
		}
	case StartSeq:
		if p.Seq == 0 {
			return invalid("seq", "start seq must be at least 1")
		}
	case StartTS:
		if p.TS < 0 {
			return invalid("ts", "%d is negative", p.TS)
		}
	case StartAfterID:
		if p.ID == "" {
			return invalid("afterId", "must not be empty with start position afterId")
		}
	default:
		return invalid("from", "unknown start position %d", int(p.Kind))
	}
	return nil
}

// resolve returns the seq after which delivery from p begins in topic.
func (b *Bus) resolve(ctx context.Context, topic string, p Position) (uint64, error) {
	switch p.Kind {
	case StartEarliest:
		return 0, nil
	case StartSeq:
		return p.Seq - 1, nil
	case StartTS:
		seq, ok, err := b.store.FirstSeqAtOrAfter(ctx, topic, p.TS)
		if err != nil {
			return 0, fmt.Errorf("event: find ts %d in %q: %w", p.TS, topic, err)
		}
		if ok {
			return seq - 1, nil
		}
	case StartAfterID:
		r, err := b.store.FindByID(ctx, topic, p.ID)
		if errors.Is(err, ErrNotFound) {
			return 0, invalid("afterId", "no record with id %q in topic %q", p.ID, topic)
		}
		if err != nil {
			return 0, fmt.Errorf("event: find id %q in %q: %w", p.ID, topic, err)
		}
		return r.Seq, nil
	}
	head, err := b.store.Head(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("event: head of %q: %w", topic, err)
	}
	return head, nil
}
