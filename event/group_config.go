package event

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/promethean/promlib/internal/backoff"
)

// GroupConfig is a consumer group's delivery policy. It belongs to the
// group, not to a subscriber: it is stored with the group when the group
// is created (explicitly with [Bus.CreateGroup], or by its first
// [Bus.Subscribe]), every member in every process delivers by the stored
// one, and [Bus.UpdateGroup] changes it for all of them within one lease
// renewal ([Config].LeaseTTL/3).
//
// A subscription asks for group settings through [SubscribeOptions].Group
// (or the options that set them, such as [WithMaxAttempts]). A zero field
// asks for nothing: the group's stored value applies (the default, for a
// new group). A field asked for with another value than the stored one
// makes the subscription fail with a [*GroupConfigError] naming it.
type GroupConfig struct {
	// Start is where the group starts when it is created; after that it
	// only records it (move a group with [Bus.ResetCursor]). The zero
	// Position is the latest.
	Start Position

	// AckTimeout is the lease of a delivery (default 30s).
	AckTimeout time.Duration
	// MaxAttempts is how many deliveries a record gets before it is
	// dead-lettered (default 5).
	MaxAttempts int
	// Backoff is the delay before the first redelivery after a nack or an
	// expired lease; it doubles with every attempt up to MaxBackoff
	// (defaults 100ms and 30s).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// DeadLetterTopic receives the records that failed MaxAttempts times
	// (default [DeadLetterTopic] of the topic: "<topic>.dlq").
	DeadLetterTopic string
	// KeyOrdered delivers the records of one key in seq order, one at a
	// time: the next record of a key is delivered once the one before it
	// is settled (acked or dead-lettered). Records of different keys are
	// in flight in parallel, up to each subscription's MaxInFlight, and a
	// key whose record was nacked or whose lease ended holds only that key
	// while it backs off. Records without a key keep no order. Each key is
	// ordered by the member that owns its partition. It cannot be changed
	// while the group has live members.
	KeyOrdered bool
	// MaxPerKey bounds the records of one key a KeyOrdered group holds at
	// once in a member: the one in flight or backing off and those waiting
	// behind it. They count against MaxInFlight; the key's later records
	// stay unread until it moves. 0 means a tenth of the member's
	// MaxInFlight (at least 1), so a few blocked keys never stop the
	// others; a member holds at most its MaxInFlight of one key.
	MaxPerKey int
	// ExpireAfter deletes the group (its cursors, state, members and
	// leases) once it has had no live member and no cursor commit for
	// this long; 0, the default, keeps it until [Bus.DeleteGroup]. A Bus
	// sweeps the groups of the topics it serves (see [Config].ExpirySweep).
	ExpireAfter time.Duration
}

// Field names of GroupConfig in errors and on the wire.
const (
	fieldStart       = "from"
	fieldAckTimeout  = "ackTimeout"
	fieldMaxAttempts = "maxAttempts"
	fieldBackoff     = "backoff"
	fieldMaxBackoff  = "maxBackoff"
	fieldDLQ         = "deadLetterTopic"
	fieldKeyOrdered  = "keyOrdered"
	fieldMaxPerKey   = "maxPerKey"
	fieldExpireAfter = "expireAfter"
)

// Validate reports every problem of c, joined; zero values are valid (they
// mean the default).
func (c *GroupConfig) Validate() error {
	var errs []error
	if err := c.Start.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.AckTimeout < 0 {
		errs = append(errs, invalid(fieldAckTimeout, "%v is negative", c.AckTimeout))
	}
	if c.MaxAttempts < 0 {
		errs = append(errs, invalid(fieldMaxAttempts, "%d is negative", c.MaxAttempts))
	}
	if c.Backoff < 0 {
		errs = append(errs, invalid(fieldBackoff, "%v is negative", c.Backoff))
	}
	if c.MaxBackoff < 0 {
		errs = append(errs, invalid(fieldMaxBackoff, "%v is negative", c.MaxBackoff))
	}
	if c.ExpireAfter < 0 {
		errs = append(errs, invalid(fieldExpireAfter, "%v is negative", c.ExpireAfter))
	}
	if c.DeadLetterTopic != "" {
		if err := validateName(fieldDLQ, c.DeadLetterTopic); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case c.MaxPerKey < 0:
		errs = append(errs, invalid(fieldMaxPerKey, "%d is negative", c.MaxPerKey))
	case c.MaxPerKey > 0 && !c.KeyOrdered:
		errs = append(errs, invalid(fieldMaxPerKey, "%d without keyOrdered: only a key-ordered group holds records per key", c.MaxPerKey))
	}
	return joinErrs(errs)
}

// setDefaults fills in the defaults of a group on topic. MaxPerKey stays 0
// (each member's share of its MaxInFlight) and so does ExpireAfter (never).
func (c *GroupConfig) setDefaults(topic string) {
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = c.Backoff
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = DeadLetterTopic(topic)
	}
}

// Resolved returns c with the defaults of a group on topic filled in, as
// a new group stores it.
func (c GroupConfig) Resolved(topic string) GroupConfig {
	c.setDefaults(topic)
	return c
}

// Horizon is the longest time from a record's first delivery to the end of
// its last possible lease: MaxAttempts leases of AckTimeout with the
// backoffs between them. After it the record is settled or dead-lettered,
// so a deduplication key must live at least this long.
func (c GroupConfig) Horizon() time.Duration {
	c.setDefaults("x")
	h := time.Duration(c.MaxAttempts) * c.AckTimeout
	for a := 1; a < c.MaxAttempts; a++ {
		h += c.backoff(a)
	}
	return h
}

// backoff returns the delay before redelivering after attempt failed.
func (c *GroupConfig) backoff(attempt int) time.Duration {
	return backoff.Policy{Initial: c.Backoff, Max: c.MaxBackoff}.Delay(attempt)
}

// Conflict is a group setting a subscription or an update asked for with
// another value than the group's.
type Conflict struct {
	Field  string `json:"field"`
	Stored string `json:"stored"`
	Asked  string `json:"asked"`
}

// conflicts returns the fields asked sets (non-zero) to other values than
// c, the group's stored settings.
func (c *GroupConfig) conflicts(asked *GroupConfig) []Conflict {
	var out []Conflict
	add := func(field string, differ bool, stored, ask any) {
		if differ {
			out = append(out, Conflict{Field: field, Stored: fmt.Sprint(stored), Asked: fmt.Sprint(ask)})
		}
	}
	add(fieldStart, !asked.Start.IsZero() && asked.Start != c.Start, c.Start, asked.Start)
	add(fieldAckTimeout, asked.AckTimeout != 0 && asked.AckTimeout != c.AckTimeout, c.AckTimeout, asked.AckTimeout)
	add(fieldMaxAttempts, asked.MaxAttempts != 0 && asked.MaxAttempts != c.MaxAttempts, c.MaxAttempts, asked.MaxAttempts)
	add(fieldBackoff, asked.Backoff != 0 && asked.Backoff != c.Backoff, c.Backoff, asked.Backoff)
	add(fieldMaxBackoff, asked.MaxBackoff != 0 && asked.MaxBackoff != c.MaxBackoff, c.MaxBackoff, asked.MaxBackoff)
	add(fieldDLQ, asked.DeadLetterTopic != "" && asked.DeadLetterTopic != c.DeadLetterTopic, c.DeadLetterTopic, asked.DeadLetterTopic)
	add(fieldKeyOrdered, asked.KeyOrdered && !c.KeyOrdered, c.KeyOrdered, asked.KeyOrdered)
	add(fieldMaxPerKey, asked.MaxPerKey != 0 && asked.MaxPerKey != c.MaxPerKey, c.MaxPerKey, asked.MaxPerKey)
	add(fieldExpireAfter, asked.ExpireAfter != 0 && asked.ExpireAfter != c.ExpireAfter, c.ExpireAfter, asked.ExpireAfter)
	return out
}

// ErrGroupConfig is wrapped by the error of a subscription that asks a
// group for other settings than its stored ones ([*GroupConfigError]).
var ErrGroupConfig = errors.New("event: group settings differ from the stored ones")

// GroupConfigError is the error of a subscription that asks a group for
// other settings than the stored ones: nothing was changed. Change the
// group's settings with [Bus.UpdateGroup], or ask for none. errors.Is
// matches it with ErrGroupConfig and ErrInvalid.
type GroupConfigError struct {
	Topic, Group string
	Conflicts    []Conflict
}

func (e *GroupConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "event: group %q on topic %q is stored with other settings than asked:", e.Group, e.Topic)
	for i, c := range e.Conflicts {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %s: stored %s, asked %s", c.Field, c.Stored, c.Asked)
	}
	b.WriteString(" (ask for none of them, or change the group with UpdateGroup)")
	return b.String()
}

// Is matches ErrGroupConfig and ErrInvalid.
func (e *GroupConfigError) Is(target error) bool {
	return target == ErrGroupConfig || target == ErrInvalid
}

// groupConfigJSON is the JSON form of a GroupConfig: durations in
// milliseconds, zero fields left out.
type groupConfigJSON struct {
	Start           *Position `json:"from,omitempty"`
	AckTimeoutMS    int64     `json:"ackTimeoutMs,omitempty"`
	MaxAttempts     int       `json:"maxAttempts,omitempty"`
	BackoffMS       int64     `json:"backoffMs,omitempty"`
	MaxBackoffMS    int64     `json:"maxBackoffMs,omitempty"`
	DeadLetterTopic string    `json:"deadLetterTopic,omitempty"`
	KeyOrdered      bool      `json:"keyOrdered,omitempty"`
	MaxPerKey       int       `json:"maxPerKey,omitempty"`
	ExpireAfterMS   int64     `json:"expireAfterMs,omitempty"`
}

// MarshalJSON writes c with durations in milliseconds (ackTimeoutMs,
// backoffMs, maxBackoffMs, expireAfterMs), as stores keep it and the ops
// endpoints show it.
func (c GroupConfig) MarshalJSON() ([]byte, error) {
	j := groupConfigJSON{
		AckTimeoutMS: c.AckTimeout.Milliseconds(), MaxAttempts: c.MaxAttempts,
		BackoffMS: c.Backoff.Milliseconds(), MaxBackoffMS: c.MaxBackoff.Milliseconds(),
		DeadLetterTopic: c.DeadLetterTopic, KeyOrdered: c.KeyOrdered, MaxPerKey: c.MaxPerKey,
		ExpireAfterMS: c.ExpireAfter.Milliseconds(),
	}
	if !c.Start.IsZero() {
		j.Start = &c.Start
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *GroupConfig) UnmarshalJSON(b []byte) error {
	var j groupConfigJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = GroupConfig{
		AckTimeout: time.Duration(j.AckTimeoutMS) * time.Millisecond, MaxAttempts: j.MaxAttempts,
		Backoff:         time.Duration(j.BackoffMS) * time.Millisecond,
		MaxBackoff:      time.Duration(j.MaxBackoffMS) * time.Millisecond,
		DeadLetterTopic: j.DeadLetterTopic, KeyOrdered: j.KeyOrdered, MaxPerKey: j.MaxPerKey,
		ExpireAfter: time.Duration(j.ExpireAfterMS) * time.Millisecond,
	}
	if j.Start != nil {
		c.Start = *j.Start
	}
	return nil
}

// GroupStore keeps the settings of consumer groups ([GroupConfig]), so
// that every member of a group, in every process, delivers by one policy.
type GroupStore interface {
	// CreateGroup stores cfg as the settings of group on topic unless the
	// group has some, and returns the settings it has now and whether
	// this call created them. Of concurrent calls for one group, exactly
	// one creates them and all return the same settings.
	CreateGroup(ctx context.Context, topic, group string, cfg GroupConfig) (GroupConfig, bool, error)
	// GroupConfig returns the settings of group on topic, or an error
	// wrapping ErrNotFound when it has none.
	GroupConfig(ctx context.Context, topic, group string) (GroupConfig, error)
	// UpdateGroup replaces the settings of group on topic; a group without
	// settings is an error wrapping ErrNotFound.
	UpdateGroup(ctx context.Context, topic, group string, cfg GroupConfig) error
}
