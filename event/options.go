package event

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// MaxIDLen is the longest record id a publisher may give.
const MaxIDLen = 255

// PublishOptions are the per-call settings of [Bus.Publish]. The zero value
// means: a new UUIDv7 id, the current time, no key.
type PublishOptions struct {
	ID       string
	TS       int64
	Key      string
	Headers  map[string]string
	Tags     []string
	CausedBy []string
	SID      string
	// ContentType is the payload's media type; empty means JSON
	// ([WithContentType]).
	ContentType string
}

// PublishOption sets a field of [PublishOptions].
type PublishOption func(*PublishOptions)

// resolvePublish applies opts to zero options. With no option it allocates
// nothing: the options reach the heap (through the calls that fill them)
// only when there are some to apply.
func resolvePublish(opts []PublishOption) PublishOptions {
	if len(opts) == 0 {
		return PublishOptions{}
	}
	o := new(PublishOptions)
	for _, opt := range opts {
		opt(o)
	}
	return *o
}

// WithID sets the record id. Publishing an id the topic already holds returns
// the stored record and stores nothing new.
func WithID(id string) PublishOption { return func(o *PublishOptions) { o.ID = id } }

// WithTS sets the record timestamp in Unix milliseconds.
func WithTS(ms int64) PublishOption { return func(o *PublishOptions) { o.TS = ms } }

// WithKey sets the record key, used for partitioning and compaction.
func WithKey(key string) PublishOption { return func(o *PublishOptions) { o.Key = key } }

// WithHeaders sets the record headers. The map is copied.
func WithHeaders(h map[string]string) PublishOption {
	return func(o *PublishOptions) {
		if len(h) == 0 {
			return
		}
		o.Headers = make(map[string]string, len(h))
		for k, v := range h {
			o.Headers[k] = v
		}
	}
}

// WithTags sets the record tags.
func WithTags(tags ...string) PublishOption {
	return func(o *PublishOptions) { o.Tags = append([]string(nil), tags...) }
}

// WithCausedBy sets the ids of the events that caused this one.
func WithCausedBy(ids ...string) PublishOption {
	return func(o *PublishOptions) { o.CausedBy = append([]string(nil), ids...) }
}

// WithSID sets the publisher's session id.
func WithSID(sid string) PublishOption { return func(o *PublishOptions) { o.SID = sid } }

// WithContentType sets the payload's media type. Empty, application/json
// and the +json types mean a JSON payload (the default); a text/* payload
// must be valid UTF-8; any other type makes the payload bytes that are
// stored as they are ([Record.IsBinary]), such as [ContentTypeBinary].
func WithContentType(ct string) PublishOption {
	return func(o *PublishOptions) { o.ContentType = ct }
}

// Validate reports every problem of o, joined.
func (o *PublishOptions) Validate() error {
	var errs []error
	if len(o.ID) > MaxIDLen {
		errs = append(errs, invalid("id", "%d bytes, more than %d", len(o.ID), MaxIDLen))
	}
	if o.TS < 0 {
		errs = append(errs, invalid("ts", "%d is negative", o.TS))
	}
	errs = append(errs, o.validateText()...)
	if err := validateContentType(o.ContentType); err != nil {
		errs = append(errs, err)
	}
	return joinErrs(errs)
}

// StartPosition says where a group with no committed cursor starts.
type StartPosition int

const (
	// StartLatest delivers only events published after the group starts.
	StartLatest StartPosition = iota
	// StartEarliest delivers the whole topic.
	StartEarliest
	// StartSeq delivers from the event with the given seq (inclusive).
	StartSeq
	// StartTS delivers from the first event, in seq order, with ts >= the given ts.
	StartTS
	// StartAfterID delivers the events after the one with the given id.
	StartAfterID
)

var startNames = [...]string{"latest", "earliest", "seq", "ts", "afterId"}

func (p StartPosition) String() string {
	if int(p) >= 0 && int(p) < len(startNames) {
		return startNames[p]
	}
	return "StartPosition(" + strconv.Itoa(int(p)) + ")"
}

// ParseStartPosition parses the wire names latest, earliest, seq, ts and
// afterId; the empty string means latest.
func ParseStartPosition(s string) (StartPosition, error) {
	if s == "" {
		return StartLatest, nil
	}
	for i, n := range startNames {
		if n == s {
			return StartPosition(i), nil
		}
	}
	return 0, invalid("from", "unknown start position %q (want latest, earliest, seq, ts or afterId)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (p StartPosition) MarshalText() ([]byte, error) {
	if int(p) < 0 || int(p) >= len(startNames) {
		return nil, invalid("from", "unknown start position %d", int(p))
	}
	return []byte(startNames[p]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *StartPosition) UnmarshalText(b []byte) error {
	v, err := ParseStartPosition(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Defaults of [SubscribeOptions].
const (
	DefaultMaxInFlight  = 1000
	DefaultAckTimeout   = 30 * time.Second
	DefaultMaxAttempts  = 5
	DefaultBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
	DefaultDrainTimeout = 30 * time.Second
)

// SubscribeOptions are the settings of one subscription. The zero value of a
// field means its default.
type SubscribeOptions struct {
	// Group holds the group settings this subscription asks for: a new
	// group is created with them (defaults for the zero fields), and an
	// existing group must have the same value for every non-zero one, or
	// Subscribe fails with a [*GroupConfigError] naming the fields. See
	// [GroupConfig].
	Group GroupConfig

	// MaxInFlight bounds the deliveries of this subscription that are not
	// settled yet; at the bound the bus stops fetching (default 1000).
	MaxInFlight int
	// Concurrency is how many handler calls of this subscription run at
	// once (default 1). A key-ordered group runs the records of different
	// keys side by side up to it.
	Concurrency int
	// ManualAck leaves settling to the handler: its return value does not
	// ack; an error still nacks.
	ManualAck bool
	// DeferStart makes the handler's call not the start of an attempt: the
	// handler hands the delivery on (to a network peer, say) and calls
	// [Delivery.Start] when the work really begins. Only then does the
	// attempt count and its lease run from then; a delivery given back
	// before (its subscription closed, it waited past its lease) is no
	// attempt.
	DeferStart bool
	// Filter, when set, is asked about each event before delivery; an event
	// it rejects is settled without delivery.
	Filter func(*Record) bool
	// DrainTimeout bounds how long Close waits for running handlers
	// (default 30s).
	DrainTimeout time.Duration
	// OnAssign and OnRevoke are rebalance hooks: a stateful consumer loads
	// a partition's state in OnAssign and flushes it in OnRevoke.
	// Partitions are leased by the member (the Bus) and shared among its
	// subscriptions of the group; the hooks see the member's partitions.
	// OnAssign is called with each partition the member takes, before the
	// partition's first delivery. OnRevoke is called with each it gives up
	// (a rebalance, or Close of its last subscription of the group), after
	// the partition's deliveries in flight are settled or handed back and
	// before its lease is released, so before another member may take it.
	// A member that stalled past its lease and lost the partition calls
	// OnRevoke as soon as it notices, after giving up its deliveries in
	// flight, whose acks are then refused ([ErrStaleAck]). The calls of one
	// group in a Bus never overlap.
	OnAssign func(ctx context.Context, partition int)
	OnRevoke func(ctx context.Context, partition int)
}

// SubscribeOption sets a field of [SubscribeOptions].
type SubscribeOption func(*SubscribeOptions)

// WithOptions replaces all options by a copy of o.
func WithOptions(o SubscribeOptions) SubscribeOption {
	return func(dst *SubscribeOptions) { *dst = o }
}

// FromLatest starts a new group at the head of the topic (the default).
func FromLatest() SubscribeOption { return func(o *SubscribeOptions) { o.Group.Start = Latest() } }

// FromEarliest starts a new group at the beginning of the topic.
func FromEarliest() SubscribeOption {
	return func(o *SubscribeOptions) { o.Group.Start = Earliest() }
}

// FromSeq starts a new group at the event with the given seq.
func FromSeq(seq uint64) SubscribeOption {
	return func(o *SubscribeOptions) { o.Group.Start = AtSeq(seq) }
}

// FromTS starts a new group at the first event with ts >= ms.
func FromTS(ms int64) SubscribeOption {
	return func(o *SubscribeOptions) { o.Group.Start = AtTS(ms) }
}

// AfterID starts a new group after the event with the given id.
func AfterID(id string) SubscribeOption {
	return func(o *SubscribeOptions) { o.Group.Start = AfterRecord(id) }
}

// WithMaxInFlight sets [SubscribeOptions.MaxInFlight].
func WithMaxInFlight(n int) SubscribeOption { return func(o *SubscribeOptions) { o.MaxInFlight = n } }

// WithAckTimeout asks for the group setting [GroupConfig.AckTimeout].
func WithAckTimeout(d time.Duration) SubscribeOption {
	return func(o *SubscribeOptions) { o.Group.AckTimeout = d }
}

// WithMaxAttempts asks for the group setting [GroupConfig.MaxAttempts].
func WithMaxAttempts(n int) SubscribeOption {
	return func(o *SubscribeOptions) { o.Group.MaxAttempts = n }
}

// WithBackoff asks for the group settings [GroupConfig.Backoff] and
// [GroupConfig.MaxBackoff]: the first and the largest redelivery delay.
func WithBackoff(initial, max time.Duration) SubscribeOption {
	return func(o *SubscribeOptions) { o.Group.Backoff, o.Group.MaxBackoff = initial, max }
}

// WithDeadLetterTopic asks for the group setting [GroupConfig.DeadLetterTopic].
func WithDeadLetterTopic(topic string) SubscribeOption {
	return func(o *SubscribeOptions) { o.Group.DeadLetterTopic = topic }
}

// WithConcurrency sets [SubscribeOptions.Concurrency].
func WithConcurrency(n int) SubscribeOption { return func(o *SubscribeOptions) { o.Concurrency = n } }

// WithManualAck sets [SubscribeOptions.ManualAck].
func WithManualAck() SubscribeOption { return func(o *SubscribeOptions) { o.ManualAck = true } }

// WithDeferStart sets [SubscribeOptions.DeferStart].
func WithDeferStart() SubscribeOption { return func(o *SubscribeOptions) { o.DeferStart = true } }

// WithKeyOrdered asks for the group setting [GroupConfig.KeyOrdered]:
// records of one key in order, different keys in parallel.
func WithKeyOrdered() SubscribeOption { return func(o *SubscribeOptions) { o.Group.KeyOrdered = true } }

// WithExpireAfter asks for the group setting [GroupConfig.ExpireAfter]:
// the group is deleted after d without a member or a commit.
func WithExpireAfter(d time.Duration) SubscribeOption {
	return func(o *SubscribeOptions) { o.Group.ExpireAfter = d }
}

// WithMaxPerKey asks for the group setting [GroupConfig.MaxPerKey].
func WithMaxPerKey(n int) SubscribeOption { return func(o *SubscribeOptions) { o.Group.MaxPerKey = n } }

// WithRebalanceHooks sets [SubscribeOptions.OnAssign] and
// [SubscribeOptions.OnRevoke]; either may be nil.
func WithRebalanceHooks(onAssign, onRevoke func(ctx context.Context, partition int)) SubscribeOption {
	return func(o *SubscribeOptions) { o.OnAssign, o.OnRevoke = onAssign, onRevoke }
}

// WithFilter sets [SubscribeOptions.Filter].
func WithFilter(f func(*Record) bool) SubscribeOption {
	return func(o *SubscribeOptions) { o.Filter = f }
}

// WithDrainTimeout sets [SubscribeOptions.DrainTimeout].
func WithDrainTimeout(d time.Duration) SubscribeOption {
	return func(o *SubscribeOptions) { o.DrainTimeout = d }
}

// setDefaults fills in the defaults of the subscriber's own settings;
// the group's come from the store.
func (o *SubscribeOptions) setDefaults() {
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
}

// Validate reports every problem of o, joined; zero values are valid (they
// mean the default).
func (o *SubscribeOptions) Validate() error {
	var errs []error
	if err := o.Group.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.MaxInFlight < 0 {
		errs = append(errs, invalid("maxInFlight", "%d is negative", o.MaxInFlight))
	}
	if o.Concurrency < 0 {
		errs = append(errs, invalid("concurrency", "%d is negative", o.Concurrency))
	}
	if o.DrainTimeout < 0 {
		errs = append(errs, invalid("drainTimeout", "%v is negative", o.DrainTimeout))
	}
	return joinErrs(errs)
}

func joinErrs(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// checkPayload reports whether p can be a payload of content type ct
// ([ValidatePayloadAs]).
func checkPayload(p []byte, ct string) error { return ValidatePayloadAs(p, ct) }
