package wsframe

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsproto"
)

// The fast paths below decode the frames of the hot path (ACK, PUBLISH,
// OK, EVENT) without reflection. They accept only what they can decode
// exactly as encoding/json would: plain strings (no escapes), plain
// integers, exact field names. Anything else, including every error, goes
// to encoding/json, which then decides. frame_fast_test.go fuzzes them
// against encoding/json.

// jscan scans JSON.
type jscan struct {
	b []byte
	i int
}

func (s *jscan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jscan) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jscan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *jscan) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// plainString scans a string without escapes or control characters, of
// valid UTF-8, and returns its content.
func (s *jscan) plainString() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start, ascii := s.i, true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			v := s.b[start:j]
			return v, ascii || utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// stringInto decodes a plain string or null (which leaves dst as it is).
func (s *jscan) stringInto(dst *string) bool {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	v, ok := s.plainString()
	if ok {
		*dst = string(v)
	}
	return ok
}

// plainInt scans an integer of at most 18 digits (no fraction, exponent or
// overflow).
func (s *jscan) plainInt() (int64, bool) {
	neg := s.eat('-')
	start := s.i
	var n int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 18 || (digits > 1 && s.b[start] == '0') {
		return 0, false
	}
	if c := s.peek(); c == '.' || c == 'e' || c == 'E' {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// intInto decodes a plain integer or null (which leaves dst as it is).
func (s *jscan) intInto(dst *int64) bool {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	v, ok := s.plainInt()
	if ok {
		*dst = v
	}
	return ok
}

func (s *jscan) intIntoInt(dst *int) bool {
	v := int64(*dst)
	if !s.intInto(&v) {
		return false
	}
	*dst = int(v)
	return true
}

func (s *jscan) uintInto(dst *uint64) bool {
	if s.peek() == '-' {
		return false
	}
	v := int64(*dst)
	if !s.intInto(&v) {
		return false
	}
	*dst = uint64(v)
	return true
}

// boolInto decodes true, false or null (which leaves dst as it is).
func (s *jscan) boolInto(dst *bool) bool {
	switch {
	case s.literal("null"):
	case s.literal("true"):
		*dst = true
	case s.literal("false"):
		*dst = false
	default:
		return false
	}
	return true
}

// value skips one JSON value, validating it, and returns its bytes. A
// value nested deeper than event.MaxJSONDepth (which publish refuses) is
// left to encoding/json, which decodes it.
func (s *jscan) value(depth int) ([]byte, bool) {
	start := s.i
	if depth > event.MaxJSONDepth || !s.skip(depth) {
		return nil, false
	}
	return s.b[start:s.i], true
}

func (s *jscan) skip(depth int) bool {
	switch c := s.peek(); {
	case c == '{':
		s.i++
		s.space()
		if s.eat('}') {
			return true
		}
		for {
			s.space()
			if s.peek() != '"' || !s.skipString() {
				return false
			}
			s.space()
			if !s.eat(':') {
				return false
			}
			s.space()
			if _, ok := s.value(depth + 1); !ok {
				return false
			}
			s.space()
			if s.eat('}') {
				return true
			}
			if !s.eat(',') {
				return false
			}
		}
	case c == '[':
		s.i++
		s.space()
		if s.eat(']') {
			return true
		}
		for {
			s.space()
			if _, ok := s.value(depth + 1); !ok {
				return false
			}
			s.space()
			if s.eat(']') {
				return true
			}
			if !s.eat(',') {
				return false
			}
		}
	case c == '"':
		return s.skipString()
	case c == '-' || c >= '0' && c <= '9':
		return s.skipNumber()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *jscan) skipString() bool {
	s.i++ // the opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(s.b)-s.i < 5 {
					return false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				s.i += 5
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

func (s *jscan) skipNumber() bool {
	s.eat('-')
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.eat('0') {
		// no more integer digits after a leading zero
	} else if digits() == 0 {
		return false
	}
	if s.eat('.') && digits() == 0 {
		return false
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if !s.eat('+') {
			s.eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// object calls field for each member of the object at s.i; field decodes
// the value and reports whether it could. Keys with escapes, and unknown
// keys that encoding/json would match case-insensitively to a known one,
// fail.
func (s *jscan) object(known []string, field func(key string) bool) bool {
	s.space()
	if !s.eat('{') {
		return false
	}
	s.space()
	if s.eat('}') {
		return true
	}
	for {
		s.space()
		k, ok := s.plainString()
		if !ok {
			return false
		}
		s.space()
		if !s.eat(':') {
			return false
		}
		s.space()
		key := string(k) // no allocation for the switch in field
		if !field(key) {
			if !isKnownFold(key, known) {
				if _, ok := s.value(0); ok {
					goto next
				}
			}
			return false
		}
	next:
		s.space()
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// isKnownFold reports whether key is not an exact known field name but
// encoding/json might still match it to one (case-insensitively, or by
// its Unicode folding); such keys go to encoding/json.
func isKnownFold(key string, known []string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, k := range known {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

var (
	frameKeys  = []string{"op", "corr", "token", "topic", "group", "id", "reason", "payload", "payload_encoding", "opts", "extend_ms", "attempt"}
	optsKeys   = []string{"id", "key", "headers", "tags", "caused_by", "sid", "ts", "content_type", "from", "afterId", "seq", "ackTimeoutMs", "maxInFlight", "maxAttempts", "keyOrdered", "maxPerKey", "since", "slow"}
	serverKeys = []string{"op", "corr", "id", "seq", "code", "msg", "topic", "group", "event", "ctx", "from", "to", "reason", "recovered"}
	recordKeys = []string{"id", "seq", "ts", "topic", "key", "partition", "headers", "payload", "payload_encoding", "content_type", "caused_by", "tags", "sid"}
	ctxKeys    = []string{"attempt", "ack_deadline_ms"}
)

// rawInto keeps a raw value (copied) as a RawMessage would.
func (s *jscan) rawInto(dst *json.RawMessage, copyIt bool) bool {
	v, ok := s.value(0)
	if !ok {
		return false
	}
	if copyIt {
		v = append(json.RawMessage(nil), v...)
	}
	*dst = v
	return true
}

// viaJSON decodes the value at s.i with encoding/json (for the rare
// fields: maps and arrays).
func (s *jscan) viaJSON(dst any) bool {
	v, ok := s.value(0)
	return ok && json.Unmarshal(v, dst) == nil
}

// end checks that only white space follows.
func (s *jscan) end() bool {
	s.space()
	return s.i == len(s.b)
}

// decodeFrameFast decodes a client frame, or reports false.
func decodeFrameFast(data []byte) (*Frame, bool) {
	f := &Frame{}
	s := &jscan{b: data}
	ok := s.object(frameKeys, func(key string) bool {
		switch key {
		case "op":
			return s.stringInto(&f.Op)
		case "corr":
			return s.rawInto(&f.Corr, true)
		case "token":
			return s.stringInto(&f.Token)
		case "topic":
			return s.stringInto(&f.Topic)
		case "group":
			return s.stringInto(&f.Group)
		case "id":
			return s.stringInto(&f.ID)
		case "reason":
			return s.stringInto(&f.Reason)
		case "payload":
			return s.rawInto(&f.Payload, true)
		case "payload_encoding":
			return s.stringInto(&f.PayloadEncoding)
		case "opts":
			if s.peek() == 'n' {
				f.Opts = nil
				return s.literal("null")
			}
			if f.Opts == nil {
				f.Opts = &FrameOpts{}
			}
			return s.opts(f.Opts)
		case "extend_ms":
			if s.peek() == 'n' {
				f.ExtendMS = nil
				return s.literal("null")
			}
			var v int64
			if f.ExtendMS != nil {
				v = *f.ExtendMS
			}
			if !s.intInto(&v) {
				return false
			}
			f.ExtendMS = &v
			return true
		case "attempt":
			return s.intIntoInt(&f.Attempt)
		}
		return false
	})
	return f, ok && s.end()
}

func (s *jscan) opts(o *FrameOpts) bool {
	return s.object(optsKeys, func(key string) bool {
		switch key {
		case "id":
			return s.stringInto(&o.ID)
		case "key":
			return s.stringInto(&o.Key)
		case "sid":
			return s.stringInto(&o.SID)
		case "content_type":
			return s.stringInto(&o.ContentType)
		case "from":
			return s.stringInto(&o.From)
		case "afterId":
			return s.stringInto(&o.AfterID)
		case "ts":
			return s.intInto(&o.TS)
		case "ackTimeoutMs":
			return s.intInto(&o.AckTimeoutMS)
		case "seq":
			return s.uintInto(&o.Seq)
		case "maxInFlight":
			return s.intIntoInt(&o.MaxInFlight)
		case "maxAttempts":
			return s.intIntoInt(&o.MaxAttempts)
		case "keyOrdered":
			return s.boolInto(&o.KeyOrdered)
		case "maxPerKey":
			return s.intIntoInt(&o.MaxPerKey)
		case "since":
			if s.peek() == 'n' {
				o.Since = nil
				return s.literal("null")
			}
			var v int64
			if o.Since != nil {
				v = *o.Since
			}
			if !s.intInto(&v) {
				return false
			}
			o.Since = &v
			return true
		case "slow":
			return s.stringInto(&o.Slow)
		case "headers":
			return s.viaJSON(&o.Headers)
		case "tags":
			return s.viaJSON(&o.Tags)
		case "caused_by":
			return s.viaJSON(&o.CausedBy)
		}
		return false
	})
}

// decodeServerFast decodes a server frame, or reports false. The event's
// payload aliases data.
func decodeServerFast(data []byte) (*ServerFrame, bool) {
	f := &ServerFrame{}
	s := &jscan{b: data}
	ok := s.object(serverKeys, func(key string) bool {
		switch key {
		case "op":
			return s.stringInto(&f.Op)
		case "corr":
			return s.stringInto(&f.Corr)
		case "id":
			return s.stringInto(&f.ID)
		case "seq":
			return s.uintInto(&f.Seq)
		case "code":
			c := string(f.Code)
			if !s.stringInto(&c) {
				return false
			}
			f.Code = wsproto.Code(c)
			return true
		case "msg":
			return s.stringInto(&f.Msg)
		case "from":
			return s.uintInto(&f.From)
		case "to":
			return s.uintInto(&f.To)
		case "reason":
			return s.stringInto(&f.Reason)
		case "recovered":
			if s.peek() == 'n' {
				f.Recovered = nil
				return s.literal("null")
			}
			var v bool
			if f.Recovered != nil {
				v = *f.Recovered
			}
			if !s.boolInto(&v) {
				return false
			}
			f.Recovered = &v
			return true
		case "topic":
			return s.stringInto(&f.Topic)
		case "group":
			return s.stringInto(&f.Group)
		case "event":
			if s.peek() == 'n' {
				f.Event = nil
				return s.literal("null")
			}
			if f.Event == nil {
				f.Event = &event.Record{}
			}
			return s.record(f.Event)
		case "ctx":
			if s.peek() == 'n' {
				return s.literal("null")
			}
			return s.object(ctxKeys, func(key string) bool {
				switch key {
				case "attempt":
					return s.intIntoInt(&f.Ctx.Attempt)
				case "ack_deadline_ms":
					return s.intInto(&f.Ctx.AckDeadlineMS)
				}
				return false
			})
		}
		return false
	})
	return f, ok && s.end()
}

// record decodes an EVENT's record, and a base64 payload into its bytes;
// anything else (a binary content type without payload_encoding, bad
// base64) is left to encoding/json ([event.Record.UnmarshalJSON]).
func (s *jscan) record(r *event.Record) bool {
	var enc *string
	ok := s.object(recordKeys, func(key string) bool {
		switch key {
		case "id":
			return s.stringInto(&r.ID)
		case "seq":
			return s.uintInto(&r.Seq)
		case "ts":
			return s.intInto(&r.TS)
		case "topic":
			return s.stringInto(&r.Topic)
		case "key":
			return s.stringInto(&r.Key)
		case "partition":
			return s.intIntoInt(&r.Partition)
		case "sid":
			return s.stringInto(&r.SID)
		case "payload":
			return s.rawInto(&r.Payload, false)
		case "payload_encoding":
			if s.peek() == 'n' {
				enc = nil
				return s.literal("null")
			}
			var e string
			if !s.stringInto(&e) {
				return false
			}
			enc = &e
			return true
		case "content_type":
			return s.stringInto(&r.ContentType)
		case "headers":
			return s.viaJSON(&r.Headers)
		case "tags":
			return s.viaJSON(&r.Tags)
		case "caused_by":
			return s.viaJSON(&r.CausedBy)
		}
		return false
	})
	if !ok {
		return false
	}
	if enc == nil {
		return !r.IsBinary()
	}
	p, err := event.DecodePayload(r.Payload, *enc, r.ContentType)
	if err != nil {
		return false
	}
	r.Payload = p
	if r.ContentType == "" {
		r.ContentType = event.ContentTypeBinary
	}
	return true
}
