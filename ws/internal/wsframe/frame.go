package wsframe

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/jsonenc"
	"github.com/promethean/promlib/ws/wsproto"
)

// Frame is a client frame, decoded by [Decode]. Corr is kept as the
// raw JSON the client sent (a string, or a number from a lenient client),
// so that it is echoed exactly.
type Frame struct {
	Op     string          `json:"op"`
	Corr   json.RawMessage `json:"corr,omitempty"`
	Token  string          `json:"token,omitempty"`
	Topic  string          `json:"topic,omitempty"`
	Group  string          `json:"group,omitempty"`
	ID     string          `json:"id,omitempty"`
	Reason string          `json:"reason,omitempty"`
	// Payload is the JSON text of PUBLISH's payload. With PayloadEncoding
	// "base64" it is a base64 string of a binary payload, which [Decode]
	// replaces by the bytes it stands for.
	Payload         json.RawMessage `json:"payload,omitempty"`
	PayloadEncoding string          `json:"payload_encoding,omitempty"`
	Opts            *FrameOpts      `json:"opts,omitempty"`
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
	// ContentType is the payload's media type (event.WithContentType);
	// a binary one needs the frame's payload_encoding "base64".
	ContentType string `json:"content_type,omitempty"`

	// SUBSCRIBE
	From         string `json:"from,omitempty"`
	AfterID      string `json:"afterId,omitempty"`
	Seq          uint64 `json:"seq,omitempty"`
	AckTimeoutMS int64  `json:"ackTimeoutMs,omitempty"`
	MaxInFlight  int    `json:"maxInFlight,omitempty"`
	MaxAttempts  int    `json:"maxAttempts,omitempty"`
	// KeyOrdered and MaxPerKey are event.WithKeyOrdered and
	// event.WithMaxPerKey; maxPerKey needs keyOrdered.
	KeyOrdered bool `json:"keyOrdered,omitempty"`
	MaxPerKey  int  `json:"maxPerKey,omitempty"`

	// SUBSCRIBE without group (a live subscription)
	// Since is the last seq the client saw (0 too: nil is none): the
	// server sends what the topic holds after it, then goes on live.
	Since *int64 `json:"since,omitempty"`
	// Slow is wsproto.SlowClose (or "") or wsproto.SlowSkip.
	Slow string `json:"slow,omitempty"`
}

// Decode parses one client frame and checks that it has the fields its
// op needs, of the right types. The error is a *[wsproto.Error] with code bad_json
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
			return f, wsproto.NewError(wsproto.CodeBadJSON, err, "frame is not valid JSON: %v", err)
		}
		if te.Field == "" {
			f.Corr = nil
			return f, wsproto.NewError(wsproto.CodeBadFrame, err, "frame must be a JSON object, not %s", te.Value)
		}
		if te.Field == "corr" {
			f.Corr = nil
		}
		return f, wsproto.NewError(wsproto.CodeBadFrame, err, "%s: want %s, not %s", te.Field, typeName(te.Type.String()), te.Value)
	}
	if len(f.Corr) > 0 {
		switch c := f.Corr[0]; {
		case c == '"', c == '-', c >= '0' && c <= '9':
		case string(f.Corr) == "null":
			f.Corr = nil
		default:
			f.Corr = nil
			return f, wsproto.NewError(wsproto.CodeBadFrame, nil, "corr: want a string")
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
	case "bool":
		return "a boolean"
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
	missing := func(field string) error {
		return wsproto.NewError(wsproto.CodeBadFrame, nil, "%s: missing or empty", field)
	}
	// needTG checks topic and group of an op that only a subscription of
	// a consumer group has.
	needTG := func(what string) error {
		switch {
		case f.Topic == "":
			return missing("topic")
		case f.Group == "":
			return wsproto.NewError(wsproto.CodeBadFrame, nil, "group: missing or empty (%s; a live subscription, without group, has none)", what)
		}
		return nil
	}
	switch f.Op {
	case "":
		return missing("op")
	case wsproto.OpAuth:
		return nil
	case wsproto.OpPublish:
		if f.Topic == "" {
			return missing("topic")
		}
		if f.Payload == nil {
			return wsproto.NewError(wsproto.CodeBadFrame, nil, "payload: missing (send null for no payload)")
		}
		if f.Opts != nil && f.Opts.TS < 0 {
			return wsproto.NewError(wsproto.CodeBadFrame, nil, "opts.ts: %d is negative", f.Opts.TS)
		}
		return f.decodePayload()
	case wsproto.OpSubscribe:
		if f.Topic == "" {
			return missing("topic")
		}
		if err := f.checkNotSubscribe(); err != nil {
			return err
		}
		if f.Group == "" {
			return f.Opts.checkLive()
		}
		return f.Opts.checkSubscribe()
	case wsproto.OpUnsubscribe:
		// Without group it ends the live subscription of the topic.
		if f.Topic == "" {
			return missing("topic")
		}
		return nil
	case wsproto.OpPause, wsproto.OpResume:
		return needTG(f.Op + " applies to a subscription of a consumer group")
	case wsproto.OpAck, wsproto.OpNack, wsproto.OpModAck:
		if err := needTG(f.Op + " settles an event of a consumer group"); err != nil {
			return err
		}
		if f.ID == "" {
			return missing("id")
		}
		if f.Attempt < 0 {
			return wsproto.NewError(wsproto.CodeBadFrame, nil, "attempt: %d is negative", f.Attempt)
		}
		if f.Op == wsproto.OpModAck {
			switch {
			case f.ExtendMS == nil:
				return missing("extend_ms")
			case *f.ExtendMS <= 0:
				return wsproto.NewError(wsproto.CodeBadFrame, nil, "extend_ms: %d, want a positive number of milliseconds", *f.ExtendMS)
			case *f.ExtendMS > math.MaxInt64/int64(time.Millisecond):
				return wsproto.NewError(wsproto.CodeBadFrame, nil, "extend_ms: %d is too large", *f.ExtendMS)
			}
		}
		return nil
	}
	return wsproto.NewError(wsproto.CodeBadFrame, nil, "op: unknown op %q", Truncate(f.Op, 64))
}

// decodePayload checks PUBLISH's payload_encoding against its content
// type and replaces a base64 payload by its bytes; a base64 payload
// without a content type is application/octet-stream.
func (f *Frame) decodePayload() error {
	var ct string
	if f.Opts != nil {
		ct = f.Opts.ContentType
	}
	if f.PayloadEncoding == "" {
		if !event.IsJSONContentType(ct) {
			return wsproto.NewError(wsproto.CodeBadFrame, nil, "payload_encoding: missing; opts.content_type %q is binary: send the payload in base64 with payload_encoding %q", Truncate(ct, 64), event.PayloadEncodingBase64)
		}
		return nil
	}
	p, err := event.DecodePayload(f.Payload, f.PayloadEncoding, ct)
	if err != nil {
		return wsproto.NewError(wsproto.CodeBadFrame, err, "%v", err)
	}
	f.Payload, f.PayloadEncoding = p, ""
	if ct == "" {
		if f.Opts == nil {
			f.Opts = &FrameOpts{}
		}
		f.Opts.ContentType = event.ContentTypeBinary
	}
	return nil
}

// checkNotSubscribe refuses, naming it, a field of a SUBSCRIBE that
// belongs to another op: the gateway would not use it, and a client that
// sent it expects something SUBSCRIBE does not do. A field counts when its
// value is not empty: null, "", 0, {} and [] are as good as absent, as
// they are for every op. Fields no op knows are left alone (ignored), for
// clients that send extra ones.
func (f *Frame) checkNotSubscribe() error {
	other := func(field, of string) error {
		return wsproto.NewError(wsproto.CodeBadFrame, nil, "%s: not supported in SUBSCRIBE (it is a field of %s)", field, of)
	}
	switch {
	case f.Token != "":
		return other("token", "AUTH")
	case len(f.Payload) > 0 && string(f.Payload) != "null":
		return other("payload", "PUBLISH")
	case f.PayloadEncoding != "":
		return other("payload_encoding", "PUBLISH")
	case f.ID != "":
		return other("id", "ACK, NACK and MODACK")
	case f.Reason != "":
		return other("reason", "NACK")
	case f.ExtendMS != nil && *f.ExtendMS != 0:
		return other("extend_ms", "MODACK")
	case f.Attempt != 0:
		return other("attempt", "ACK, NACK and MODACK")
	}
	o := f.Opts
	if o == nil {
		return nil
	}
	opt := func(field string) error {
		return wsproto.NewError(wsproto.CodeBadFrame, nil, "opts.%s: not supported in SUBSCRIBE (it is an option of PUBLISH)", field)
	}
	switch {
	case o.ID != "":
		return opt("id")
	case o.Key != "":
		return opt("key")
	case len(o.Headers) > 0:
		return opt("headers")
	case len(o.Tags) > 0:
		return opt("tags")
	case len(o.CausedBy) > 0:
		return opt("caused_by")
	case o.SID != "":
		return opt("sid")
	case o.ContentType != "":
		return opt("content_type")
	}
	return nil
}

func (o *FrameOpts) checkSubscribe() error {
	if o == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return wsproto.NewError(wsproto.CodeBadFrame, nil, format, args...)
	}
	live := func(field string) error {
		return bad("opts.%s: not supported in a SUBSCRIBE with a group (it is an option of a live subscription, without group; a group resumes from its cursor)", field)
	}
	switch {
	case o.Since != nil && *o.Since != 0: // 0 counts as absent, as every empty value
		return live("since")
	case o.Slow != "":
		return live("slow")
	}
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
	case o.MaxPerKey < 0:
		return bad("opts.maxPerKey: %d is negative", o.MaxPerKey)
	case o.MaxPerKey > 0 && !o.KeyOrdered:
		return bad("opts.maxPerKey: %d without opts.keyOrdered true; only a key-ordered subscription holds records per key", o.MaxPerKey)
	}
	return nil
}

// checkLive checks the opts of a SUBSCRIBE without group: since and slow,
// and none of the options of a consumer group (each refused by name; an
// empty value counts as absent).
func (o *FrameOpts) checkLive() error {
	if o == nil {
		return nil
	}
	group := func(field string) error {
		return wsproto.NewError(wsproto.CodeBadFrame, nil, "opts.%s: not supported in a live SUBSCRIBE (it is an option of a consumer group: give a group, or leave it out)", field)
	}
	switch {
	case o.From != "":
		return group("from")
	case o.TS != 0:
		return group("ts")
	case o.Seq != 0:
		return group("seq")
	case o.AfterID != "":
		return group("afterId")
	case o.AckTimeoutMS != 0:
		return group("ackTimeoutMs")
	case o.MaxInFlight != 0:
		return group("maxInFlight")
	case o.MaxAttempts != 0:
		return group("maxAttempts")
	case o.KeyOrdered:
		return group("keyOrdered")
	case o.MaxPerKey != 0:
		return group("maxPerKey")
	}
	if o.Since != nil && *o.Since < 0 {
		return wsproto.NewError(wsproto.CodeBadFrame, nil, "opts.since: %d is negative (want the last seq seen, 0 for none)", *o.Since)
	}
	switch o.Slow {
	case "", wsproto.SlowClose, wsproto.SlowSkip:
	default:
		return wsproto.NewError(wsproto.CodeBadFrame, nil, "opts.slow: unknown policy %q (want %q or %q)", Truncate(o.Slow, 64), wsproto.SlowClose, wsproto.SlowSkip)
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
	if o.ContentType != "" {
		opts = append(opts, event.WithContentType(o.ContentType))
	}
	return opts
}

// AppendBase64String appends p as a JSON string of its standard base64,
// the payload of a frame with payload_encoding "base64".
func AppendBase64String(b, p []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, '"')
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
		b = jsonenc.String(b, id)
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, seq, 10)
	}
	return append(b, '}')
}

// AppendLiveOK writes the OK of a live SUBSCRIBE: seq, the last seq the
// subscription does not deliver, and, for a SUBSCRIBE with since, whether
// every event after since is delivered.
func AppendLiveOK(b []byte, corr json.RawMessage, seq uint64, recovered *bool) []byte {
	b = append(b, `{"op":"OK"`...)
	if len(corr) > 0 {
		b = append(b, `,"corr":`...)
		b = append(b, corr...)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	if recovered != nil {
		b = append(b, `,"recovered":`...)
		b = strconv.AppendBool(b, *recovered)
	}
	return append(b, '}')
}

// AppendErr writes an ERR frame; topic and group are set for an ERR about
// a subscription that no frame of the client asked about (one ended by a
// re-AUTH); a live subscription's has no group.
func AppendErr(b []byte, corr json.RawMessage, code wsproto.Code, msg, topic, group string) []byte {
	b = append(b, `{"op":"ERR","code":`...)
	b = jsonenc.String(b, string(code))
	b = append(b, `,"msg":`...)
	b = jsonenc.String(b, msg)
	if topic != "" {
		b = append(b, `,"topic":`...)
		b = jsonenc.String(b, topic)
		if group != "" {
			b = append(b, `,"group":`...)
			b = jsonenc.String(b, group)
		}
	}
	if len(corr) > 0 {
		b = append(b, `,"corr":`...)
		b = append(b, corr...)
	}
	return append(b, '}')
}

func AppendEvent(b []byte, topic, group string, r *event.Record, attempt int, deadlineMS int64) []byte {
	b = append(b, `{"op":"EVENT","topic":`...)
	b = jsonenc.String(b, topic)
	b = append(b, `,"group":`...)
	b = jsonenc.String(b, group)
	b = append(b, `,"event":`...)
	b = event.AppendRecordJSON(b, r)
	b = append(b, `,"ctx":{"attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, `,"ack_deadline_ms":`...)
	b = strconv.AppendInt(b, deadlineMS, 10)
	return append(b, "}}"...)
}

// AppendLiveEvent writes the EVENT frame of a live subscription: no group,
// no ctx.
func AppendLiveEvent(b []byte, topic string, r *event.Record) []byte {
	b = append(b, `{"op":"EVENT","topic":`...)
	b = jsonenc.String(b, topic)
	b = append(b, `,"event":`...)
	b = event.AppendRecordJSON(b, r)
	return append(b, '}')
}

// AppendGap writes a GAP frame: the seqs from..to of topic that a live
// subscription does not deliver, and why (wsproto.GapDeleted, wsproto.GapSlow).
func AppendGap(b []byte, topic string, from, to uint64, reason string) []byte {
	b = append(b, `{"op":"GAP","topic":`...)
	b = jsonenc.String(b, topic)
	b = append(b, `,"from":`...)
	b = strconv.AppendUint(b, from, 10)
	b = append(b, `,"to":`...)
	b = strconv.AppendUint(b, to, 10)
	b = append(b, `,"reason":`...)
	b = jsonenc.String(b, reason)
	return append(b, '}')
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
	b = jsonenc.String(b, f.Op)
	if len(f.Corr) > 0 {
		b = append(b, `,"corr":`...)
		b = append(b, f.Corr...)
	}
	field := func(name, v string) {
		if v != "" {
			b = append(b, ',', '"')
			b = append(b, name...)
			b = append(b, '"', ':')
			b = jsonenc.String(b, v)
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
	field("payload_encoding", f.PayloadEncoding)
	if o := f.Opts; o != nil {
		b = append(b, `,"opts":{`...)
		mark := len(b)
		field("id", o.ID)
		field("key", o.Key)
		if len(o.Headers) > 0 {
			b = append(b, `,"headers":`...)
			b = jsonenc.StringMap(b, o.Headers)
		}
		if len(o.Tags) > 0 {
			b = append(b, `,"tags":`...)
			b = jsonenc.Strings(b, o.Tags)
		}
		if len(o.CausedBy) > 0 {
			b = append(b, `,"caused_by":`...)
			b = jsonenc.Strings(b, o.CausedBy)
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
		field("content_type", o.ContentType)
		field("from", o.From)
		field("afterId", o.AfterID)
		if o.Seq != 0 {
			b = append(b, `,"seq":`...)
			b = strconv.AppendUint(b, o.Seq, 10)
		}
		num("ackTimeoutMs", o.AckTimeoutMS)
		num("maxInFlight", int64(o.MaxInFlight))
		num("maxAttempts", int64(o.MaxAttempts))
		if o.KeyOrdered {
			b = append(b, `,"keyOrdered":true`...)
		}
		num("maxPerKey", int64(o.MaxPerKey))
		if o.Since != nil {
			b = append(b, `,"since":`...)
			b = strconv.AppendInt(b, *o.Since, 10)
		}
		field("slow", o.Slow)
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
