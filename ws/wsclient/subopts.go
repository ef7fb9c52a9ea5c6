package wsclient

import (
	"fmt"
	"reflect"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/internal/wsframe"
)

// subSettings are the options of a client subscription: the opts of its
// SUBSCRIBE frame and the settings the client applies itself.
type subSettings struct {
	wire        wsframe.FrameOpts
	manual      bool
	concurrency int
	drain       time.Duration
}

// notCarried says why the client refuses a field it cannot honour; a
// field without an entry gets the generic reason.
var notCarried = map[string]string{
	"DeferStart":      "the server starts each attempt when it sends the delivery",
	"OnAssign":        "partitions are assigned to the server's bus, not to its clients: no rebalance reaches a client",
	"OnRevoke":        "partitions are assigned to the server's bus, not to its clients: no rebalance reaches a client",
	"Filter":          "the server sends every event of the group; filter in the handler",
	"Backoff":         "SUBSCRIBE carries no backoff: the redelivery delay is the group's setting on the server",
	"MaxBackoff":      "SUBSCRIBE carries no backoff: the redelivery delay is the group's setting on the server",
	"DeadLetterTopic": "SUBSCRIBE carries no dead-letter topic: it is the group's setting on the server",
	"ExpireAfter":     "SUBSCRIBE carries no group expiry: it is the group's setting on the server",
}

// unsupported is the error of an option the client cannot honour. It
// matches event.ErrInvalid (which it wraps) and ErrInvalid.
type unsupported struct{ err error }

func (e *unsupported) Error() string        { return e.err.Error() }
func (e *unsupported) Unwrap() error        { return e.err }
func (e *unsupported) Is(target error) bool { return target == ErrInvalid }

func refuse(field string) error {
	why, ok := notCarried[field]
	if !ok {
		why = "SUBSCRIBE has no field for it"
	}
	return &unsupported{fmt.Errorf("%w: %s: not supported over the WebSocket gateway (%s)", event.ErrInvalid, field, why)}
}

// subscribeSettings applies opts to zero options and returns what the
// subscription takes from them, with the problems o.Validate finds and
// an error naming each option set that the client cannot honour.
//
// The client honours the group's start position, AckTimeout,
// MaxAttempts, KeyOrdered and MaxPerKey and the subscriber's MaxInFlight,
// which go in SUBSCRIBE's opts, and ManualAck, Concurrency and
// DrainTimeout, which it applies itself. Those are taken out of the
// options; every field still set after that is refused by its name. So
// no option is dropped in silence, also none that package event adds
// later.
func subscribeSettings(opts []event.SubscribeOption) (subSettings, []error) {
	var o event.SubscribeOptions
	for _, opt := range opts {
		opt(&o)
	}
	var errs []error
	if err := o.Validate(); err != nil {
		errs = append(errs, err)
	}

	var s subSettings
	w := &s.wire
	switch p := o.Group.Start; p.Kind {
	case event.StartEarliest:
		w.From = "earliest"
	case event.StartSeq:
		w.From, w.Seq = "seq", p.Seq
	case event.StartTS:
		w.From, w.TS = "ts", p.TS
	case event.StartAfterID:
		w.From, w.AfterID = "afterId", p.ID
	}
	if d := o.Group.AckTimeout; d > 0 {
		w.AckTimeoutMS = max(d.Milliseconds(), 1) // the wire counts milliseconds
	}
	w.MaxAttempts = o.Group.MaxAttempts
	w.KeyOrdered = o.Group.KeyOrdered
	w.MaxPerKey = o.Group.MaxPerKey
	w.MaxInFlight = o.MaxInFlight
	s.manual = o.ManualAck
	s.concurrency = max(o.Concurrency, 1)
	s.drain = o.DrainTimeout
	if s.drain == 0 {
		s.drain = event.DefaultDrainTimeout
	}

	rest := o
	rest.Group.Start = event.Position{}
	rest.Group.AckTimeout, rest.Group.MaxAttempts = 0, 0
	rest.Group.KeyOrdered, rest.Group.MaxPerKey = false, 0
	rest.MaxInFlight, rest.ManualAck, rest.Concurrency, rest.DrainTimeout = 0, false, 0, 0
	for _, field := range setFields(reflect.ValueOf(rest)) {
		errs = append(errs, refuse(field))
	}
	return s, errs
}

// eventPkg is the import path of package event.
var eventPkg = reflect.TypeFor[event.SubscribeOptions]().PkgPath()

// setFields returns the names of the non-zero fields of the struct v, in
// order, looking into its fields that are structs of package event (the
// group settings): "Backoff", not "Group.Backoff".
func setFields(v reflect.Value) []string {
	var names []string
	t := v.Type()
	for i := range t.NumField() {
		sf, fv := t.Field(i), v.Field(i)
		switch {
		case fv.IsZero():
		case sf.Type.Kind() == reflect.Struct && sf.Type.PkgPath() == eventPkg:
			names = append(names, setFields(fv)...)
		default:
			names = append(names, sf.Name)
		}
	}
	return names
}
