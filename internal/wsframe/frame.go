package wsframe

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/promethean/promlib/event"
)

// Ops of the protocol.
const (
	OpAuth        = "AUTH"
	OpPublish     = "PUBLISH"
	OpSubscribe   = "SUBSCRIBE"
	OpUnsubscribe = "UNSUBSCRIBE"
	OpAck         = "ACK"
	OpNack        = "NACK"
	OpModAck      = "MODACK"
	OpPause       = "PAUSE"
	OpResume      = "RESUME"
	OpOK          = "OK"
	OpErr         = "ERR"
	OpEvent       = "EVENT"
)

// Frame is a client frame, decoded by [Decode]. Corr is kept as the
// raw JSON the client sent (a string, or a number from a lenient client),
// so that it is echoed exactly.
type Frame struct {
	Op      string          `json:"op"`
	Corr    json.RawMessage `json:"corr,omitempty"`
	Token   string          `json:"token,omitempty"`
	Topic   string          `json:"topic,omitempty"`
	Group   string          `json:"group,omitempty"`
	ID      string          `json:"id,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Opts    *FrameOpts      `json:"opts,omitempty"`
	// ExtendMS is MODACK's lease extension in milliseconds.
	ExtendMS *int64 `json:"extend_ms,omitempty"`
	// Attempt is an addition to the seed protocol: ACK, NACK and MODACK may
	// name the attempt they settle (ctx.attempt of the EVENT). Without it
	// the gateway uses the attempt it sent last for that id.
	Attempt int `json:"attempt,omitempty"`
}

// FrameOpts are the opts of PUBLISH and SUBSCRIBE (ts serves both).
type FrameOpts struct {
	// PUBLISH
	ID       string            `json:"id,omitempty"`
	Key      string            `json:"key,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
	CausedBy []string          `json:"caused_by,omitempty"`
	SID      string            `json:"sid,omitempty"`
	TS       int64             `json:"ts,omitempty"`

	// SUBSCRIBE
	From         string `json:"from,omitempty"`
	AfterID      string `json:"afterId,omitempty"`
	Seq          uint64 `json:"seq,omitempty"`
	AckTimeoutMS int64  `json:"ackTimeoutMs,omitempty"`
	MaxInFlight  int    `json:"maxInFlight,omitempty"`
	MaxAttempts  int    `json:"maxAttempts,omitempty"`
}

// Decode parses one client frame and checks that it has the fields its
// op needs, of the right types. The error is a *[Error] with code bad_json
// or bad_frame whose message names the field; the returned frame is
// non-nil even then, with whatever could be decoded (its Corr to echo).
func Decode(data []byte) (*Frame, error) {
	f, ok := decodeFrameFast(data)
	if !ok {
		f = &Frame{}
	}
	if err := decodeSlow(ok, data, f); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			f.Corr = nil
			return f, NewError(CodeBadJSON, err, "frame is not valid JSON: %v", err)
		}
		if te.Field == "" {
			f.Corr = nil
			return f, NewError(CodeBadFrame, err, "frame must be a JSON object, not %s", te.Value)
		}
		if te.Field == "corr" {
			f.Corr = nil
		}
		return f, NewError(CodeBadFrame, err, "%s: want %s, not %s", te.Field, typeName(te.Type.String()), te.Value)
	}
	if len(f.Corr) > 0 {
		switch c := f.Corr[0]; {
		case c == '"', c == '-', c >= '0' && c <= '9':
		case string(f.Corr) == "null":
			f.Corr = nil
		default:
			f.Corr = nil
			return f, NewError(CodeBadFrame, nil, "corr: want a string")
		}
	}
	return f, f.check()
}

// decodeSlow decodes with encoding/json unless the fast path did.
func decodeSlow(done bool, data []byte, f *Frame) error {
	if done {
		return nil
	}
	return json.Unmarshal(data, f)
}

// typeName turns a Go type into the JSON type a client should send.
func typeName(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "int", "int64", "uint64":
		return "an integer"
	case "map[string]string":
		return "an object of strings"
	case "[]string":
		return "an array of strings"
	case "wsframe.FrameOpts", "*wsframe.FrameOpts":
		return "an object"
	}
	return goType
}

func (f *Frame) check() error {
	missing := func(field string) error { return NewError(CodeBadFrame, nil, "%s: missing or empty", field) }
	needTG := func() error {
		switch {
		case f.Topic == "":
			return missing("topic")
		case f.Group == "":
			return missing("group")
		}
		return nil
	}
	switch f.Op {
	case "":
		return missing("op")
	case OpAuth:
		return nil
	case OpPublish:
		if f.Topic == "" {
			return missing("topic")
		}
		if f.Payload == nil {
			return NewError(CodeBadFrame, nil, "payload: missing (send null for no payload)")
		}
		if f.Opts != nil && f.Opts.TS < 0 {
			return NewError(CodeBadFrame, nil, "opts.ts: %d is negative", f.Opts.TS)
		}
		return nil
	case OpSubscribe:
		if err := needTG(); err != nil {
			return err
		}
		return f.Opts.checkSubscribe()
	case OpUnsubscribe, OpPause, OpResume:
		return needTG()
	case OpAck, OpNack, OpModAck:
		if err := needTG(); err != nil {
			return err
		}
		if f.ID == "" {
			return missing("id")
		}
		if f.Attempt < 0 {
			return NewError(CodeBadFrame, nil, "attempt: %d is negative", f.Attempt)
		}
		if f.Op == OpModAck {
			switch {
			case f.ExtendMS == nil:
				return missing("extend_ms")
			case *f.ExtendMS <= 0:
				return NewError(CodeBadFrame, nil, "extend_ms: %d, want a positive number of milliseconds", *f.ExtendMS)
			case *f.ExtendMS > math.MaxInt64/int64(time.Millisecond):
				return NewError(CodeBadFrame, nil, "extend_ms: %d is too large", *f.ExtendMS)
			}
		}
		return nil
	}
	return NewError(CodeBadFrame, nil, "op: unknown op %q", Truncate(f.Op, 64))
}

func (o *FrameOpts) checkSubscribe() error {
	if o == nil {
		return nil
	}
	bad := func(format string, args ...any) error { return NewError(CodeBadFrame, nil, format, args...) }
	switch o.From {
	case "", "latest", "earliest":
	case "ts":
		if o.TS <= 0 {
			return bad("opts.ts: missing or not positive, needed by from \"ts\"")
		}
	case "seq":
		if o.Seq == 0 {
			return bad("opts.seq: missing or 0, needed by from \"seq\"")
		}
	case "afterId":
		if o.AfterID == "" {
			return bad("opts.afterId: missing or empty, needed by from \"afterId\"")
		}
	default:
		return bad("opts.from: unknown start %q (want latest, earliest, ts, seq or afterId)", Truncate(o.From, 64))
	}
	switch {
	case o.TS < 0:
		return bad("opts.ts: %d is negative", o.TS)
	case o.AckTimeoutMS < 0:
		return bad("opts.ackTimeoutMs: %d is negative", o.AckTimeoutMS)
	case o.AckTimeoutMS > math.MaxInt64/int64(time.Millisecond):
		return bad("opts.ackTimeoutMs: %d is too large", o.AckTimeoutMS)
	case o.MaxInFlight < 0:
		return bad("opts.maxInFlight: %d is negative", o.MaxInFlight)
	case o.MaxAttempts < 0:
		return bad("opts.maxAttempts: %d is negative", o.MaxAttempts)
	}
	return nil
}

// publishOptions turns PUBLISH opts into bus options.
func (o *FrameOpts) PublishOptions() []event.PublishOption {
	if o == nil {
		return nil
	}
	var opts []event.PublishOption
	if o.ID != "" {
		opts = append(opts, event.WithID(o.ID))
	}
	if o.Key != "" {
		opts = append(opts, event.WithKey(o.Key))
	}
	if len(o.Headers) > 0 {
		opts = append(opts, event.WithHeaders(o.Headers))
	}
	if len(o.Tags) > 0 {
		opts = append(opts, event.WithTags(o.Tags...))
	}
	if len(o.CausedBy) > 0 {
		opts = append(opts, event.WithCausedBy(o.CausedBy...))
	}
	if o.SID != "" {
		opts = append(opts, event.WithSID(o.SID))
	}
	if o.TS > 0 {
		opts = append(opts, event.WithTS(o.TS))
	}
	return opts
}

func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// Server frames are written by hand: they are the hot path of delivery,
// and their shape is fixed. frame_test.go holds them equal to
// encoding/json's output.

func AppendOK(b []byte, corr json.RawMessage, id string, seq uint64) []byte {
	b = append(b, `{"op":"OK"`...)
	if len(corr) > 0 {
		b = append(b, `,"corr":`...)
		b = append(b, corr...)
	}
	if id != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, id)
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, seq, 10)
	}
	return append(b, '}')
}

// AppendErr writes an ERR frame; topic and group are set for an ERR about
// a subscription that no frame of the client asked about (one ended by a
// re-AUTH).
func AppendErr(b []byte, corr json.RawMessage, code Code, msg, topic, group string) []byte {
	b = append(b, `{"op":"ERR","code":`...)
	b = appendString(b, string(code))
	b = append(b, `,"msg":`...)
	b = appendString(b, msg)
	if topic != "" {
		b = append(b, `,"topic":`...)
		b = appendString(b, topic)
		b = append(b, `,"group":`...)
		b = appendString(b, group)
	}
	if len(corr) > 0 {
		b = append(b, `,"corr":`...)
		b = append(b, corr...)
	}
	return append(b, '}')
}

func AppendEvent(b []byte, topic, group string, r *event.Record, attempt int, deadlineMS int64) []byte {
	b = append(b, `{"op":"EVENT","topic":`...)
	b = appendString(b, topic)
	b = append(b, `,"group":`...)
	b = appendString(b, group)
	b = append(b, `,"event":`...)
	b = appendRecord(b, r)
	b = append(b, `,"ctx":{"attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, `,"ack_deadline_ms":`...)
	b = strconv.AppendInt(b, deadlineMS, 10)
	return append(b, "}}"...)
}

// appendRecord writes r as encoding/json would (see event.Record's tags).
func appendRecord(b []byte, r *event.Record) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, r.TS, 10)
	b = append(b, `,"topic":`...)
	b = appendString(b, r.Topic)
	if r.Key != "" {
		b = append(b, `,"key":`...)
		b = appendString(b, r.Key)
	}
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	if len(r.Headers) > 0 {
		b = append(b, `,"headers":{`...)
		keys := make([]string, 0, len(r.Headers))
		for k := range r.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, r.Headers[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"payload":`...)
	if len(r.Payload) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, r.Payload...)
	}
	if len(r.CausedBy) > 0 {
		b = append(b, `,"caused_by":`...)
		b = appendStrings(b, r.CausedBy)
	}
	if len(r.Tags) > 0 {
		b = append(b, `,"tags":`...)
		b = appendStrings(b, r.Tags)
	}
	if r.SID != "" {
		b = append(b, `,"sid":`...)
		b = appendString(b, r.SID)
	}
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string, escaping as encoding/json does
// (HTML characters included), with invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// deadlineMS is the ack_deadline_ms of an EVENT: the milliseconds left of
// its lease, at least 1.
func DeadlineMS(deadline, now time.Time) int64 {
	return max(deadline.Sub(now).Milliseconds(), 1)
}

// AppendFrame writes a client frame as encoding/json would with Frame's
// tags (the client's hot path: ACKs and PUBLISHes).
func AppendFrame(b []byte, f *Frame) []byte {
	b = append(b, `{"op":`...)
	b = appendString(b, f.Op)
	if len(f.Corr) > 0 {
		b = append(b, `,"corr":`...)
		b = append(b, f.Corr...)
	}
	field := func(name, v string) {
		if v != "" {
			b = append(b, ',', '"')
			b = append(b, name...)
			b = append(b, '"', ':')
			b = appendString(b, v)
		}
	}
	field("token", f.Token)
	field("topic", f.Topic)
	field("group", f.Group)
	field("id", f.ID)
	field("reason", f.Reason)
	if len(f.Payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, f.Payload...)
	}
	if o := f.Opts; o != nil {
		b = append(b, `,"opts":{`...)
		mark := len(b)
		field("id", o.ID)
		field("key", o.Key)
		if len(o.Headers) > 0 {
			b = append(b, `,"headers":{`...)
			keys := make([]string, 0, len(o.Headers))
			for k := range o.Headers {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for i, k := range keys {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, k)
				b = append(b, ':')
				b = appendString(b, o.Headers[k])
			}
			b = append(b, '}')
		}
		if len(o.Tags) > 0 {
			b = append(b, `,"tags":`...)
			b = appendStrings(b, o.Tags)
		}
		if len(o.CausedBy) > 0 {
			b = append(b, `,"caused_by":`...)
			b = appendStrings(b, o.CausedBy)
		}
		field("sid", o.SID)
		num := func(name string, v int64) {
			if v != 0 {
				b = append(b, ',', '"')
				b = append(b, name...)
				b = append(b, '"', ':')
				b = strconv.AppendInt(b, v, 10)
			}
		}
		num("ts", o.TS)
		field("from", o.From)
		field("afterId", o.AfterID)
		if o.Seq != 0 {
			b = append(b, `,"seq":`...)
			b = strconv.AppendUint(b, o.Seq, 10)
		}
		num("ackTimeoutMs", o.AckTimeoutMS)
		num("maxInFlight", int64(o.MaxInFlight))
		num("maxAttempts", int64(o.MaxAttempts))
		if len(b) > mark && b[mark] == ',' {
			b = append(b[:mark], b[mark+1:]...) // no comma after '{'
		}
		b = append(b, '}')
	}
	if f.ExtendMS != nil {
		b = append(b, `,"extend_ms":`...)
		b = strconv.AppendInt(b, *f.ExtendMS, 10)
	}
	if f.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(f.Attempt), 10)
	}
	return append(b, '}')
}
