package mongostore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/event"
)

// Field names of an event document. The document of a record is
//
//	{_id: "<topic>/<seq>", topic, seq: int64, id, ts: int64 (ms), key?, partition: int32,
//	 headers?: [{k, v}], payload: string (the JSON text) or binary, content_type?,
//	 caused_by?, tags?, sid?}
//
// Headers are a list of pairs because header names may hold characters that
// are not safe in field names ('.', a leading '$'). A JSON payload is kept as
// the JSON text the publisher gave (a binary when it is not valid UTF-8), so
// it comes back byte for byte. A record with a binary content type
// ([event.Record.IsBinary]) keeps its payload as BSON binary (subtype 0)
// and its content_type beside it; documents without content_type hold
// JSON, as every document written before content types did. The _id names the topic and seq, so that
// whether a seq exists is a lookup by _id (see [Store.Watch]); queries go by
// the topic and seq fields, so documents with other _ids are read too.
//
// A pruned record becomes a tombstone: {_id, topic, seq, id, gone: true},
// every other field removed. It keeps the seq taken (see [Store.Prune]);
// reads skip it. Its id is freed (replaced by the seq, an integer, which no
// record id is) when the id is appended again.
const (
	fID        = "_id"
	fTopic     = "topic"
	fSeq       = "seq"
	fRecID     = "id"
	fTS        = "ts"
	fKey       = "key"
	fPartition = "partition"
	fHeaders   = "headers"
	fPayload   = "payload"
	fCType     = "content_type"
	fCausedBy  = "caused_by"
	fTags      = "tags"
	fSID       = "sid"
	fGone      = "gone"
	fSize      = "sz"
)

// isTombstone reports whether raw is the tombstone of a pruned record.
func isTombstone(raw bson.Raw) bool {
	b, ok := raw.Lookup(fGone).BooleanOK()
	return ok && b
}

// tombstoneUpdate turns the records an update matches into tombstones.
var tombstoneUpdate = bson.D{
	{Key: "$set", Value: bson.D{{Key: fGone, Value: true}}},
	{Key: "$unset", Value: bson.D{
		{Key: fTS, Value: ""}, {Key: fKey, Value: ""}, {Key: fPartition, Value: ""},
		{Key: fHeaders, Value: ""}, {Key: fPayload, Value: ""}, {Key: fCType, Value: ""}, {Key: fCausedBy, Value: ""},
		{Key: fTags, Value: ""}, {Key: fSID, Value: ""}, {Key: fSize, Value: ""},
	}},
}

// notGone is the condition that a document is not a tombstone.
var notGone = bson.E{Key: fGone, Value: bson.D{{Key: "$exists", Value: false}}}

type headerDoc struct {
	K string `bson:"k"`
	V string `bson:"v"`
}

// eventDoc is the stored form of a record.
type eventDoc struct {
	ID        string      `bson:"_id"`
	Topic     string      `bson:"topic"`
	Seq       int64       `bson:"seq"`
	RecID     string      `bson:"id"`
	TS        int64       `bson:"ts"`
	Key       string      `bson:"key,omitempty"`
	Partition int32       `bson:"partition"`
	Headers   []headerDoc `bson:"headers,omitempty"`
	Payload   any         `bson:"payload"`
	CType     string      `bson:"content_type,omitempty"`
	CausedBy  []string    `bson:"caused_by,omitempty"`
	Tags      []string    `bson:"tags,omitempty"`
	SID       string      `bson:"sid,omitempty"`
	// Size is what the record counts in its topic's bytes (see
	// recordBytes); documents written before it count 0.
	Size int64 `bson:"sz,omitempty"`
}

// recordBytes is what a record counts in its topic's bytes: its payload,
// key and header names and values, as the memory store counts them.
func recordBytes(r *event.Record) int64 {
	n := int64(len(r.Payload) + len(r.Key))
	for k, v := range r.Headers {
		n += int64(len(k) + len(v))
	}
	return n
}

// docID is the _id of the document of seq in topic.
func docID(topic string, seq uint64) string { return topic + "/" + strconv.FormatUint(seq, 10) }

func encodeRecord(r *event.Record, seq uint64) eventDoc {
	d := eventDoc{
		ID: docID(r.Topic, seq), Topic: r.Topic, Seq: int64(seq), RecID: r.ID, TS: r.TS,
		Key: r.Key, Partition: int32(r.Partition), CausedBy: r.CausedBy, Tags: r.Tags, SID: r.SID,
		Size: recordBytes(r),
	}
	if len(r.Headers) > 0 {
		d.Headers = make([]headerDoc, 0, len(r.Headers))
		for k, v := range r.Headers {
			d.Headers = append(d.Headers, headerDoc{k, v})
		}
	}
	d.CType = r.ContentType
	switch {
	case r.IsBinary():
		d.Payload = bson.Binary{Data: r.Payload}
	case utf8.Valid(r.Payload):
		d.Payload = string(r.Payload)
	default:
		d.Payload = bson.Binary{Data: r.Payload}
	}
	return d
}

// badDoc describes a stored document that does not decode.
type badDoc struct {
	docID  string // the _id as extended JSON
	seq    uint64 // 0 if the seq itself is bad
	recID  string // the record id, if it decoded
	reason error
}

func (b *badDoc) Error() string { return b.reason.Error() }

func (b *badDoc) Unwrap() error { return b.reason }

// decodeRecord decodes a stored document of topic. Fields other than seq,
// id and payload are optional; a field of the wrong type is an error that
// names it.
func decodeRecord(topic string, raw bson.Raw) (event.Record, error) {
	r := event.Record{Topic: topic}
	elems, err := raw.Elements()
	if err != nil {
		return r, &badDoc{docID: "?", reason: fmt.Errorf("%w: %v", ErrBadDocument, err)}
	}
	var (
		docID              = "?"
		haveSeq, havePayld bool
		payload            bson.RawValue
		fieldErr           error
	)
	fail := func(field, format string, args ...any) {
		if fieldErr == nil {
			fieldErr = fmt.Errorf("field %q: %s", field, fmt.Sprintf(format, args...))
		}
	}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case fID:
			docID = extJSON(v)
		case fSeq:
			n, ok := intValue(v)
			if !ok || n < 1 {
				fail(fSeq, "%s, want an integer of at least 1", extJSON(v))
				continue
			}
			r.Seq, haveSeq = uint64(n), true
		case fRecID:
			s, ok := v.StringValueOK()
			if !ok || s == "" {
				fail(fRecID, "%s, want a non-empty string", extJSON(v))
				continue
			}
			r.ID = s
		case fTS:
			if dt, ok := v.DateTimeOK(); ok {
				r.TS = dt
				continue
			}
			n, ok := intValue(v)
			if !ok {
				fail(fTS, "%s, want milliseconds as an integer", extJSON(v))
				continue
			}
			r.TS = n
		case fKey:
			if v.Type == bson.TypeNull {
				continue
			}
			s, ok := v.StringValueOK()
			if !ok {
				fail(fKey, "%s, want a string", extJSON(v))
				continue
			}
			r.Key = s
		case fPartition:
			n, ok := intValue(v)
			if !ok || n < 0 || n > math.MaxInt32 {
				fail(fPartition, "%s, want a non-negative integer", extJSON(v))
				continue
			}
			r.Partition = int(n)
		case fHeaders:
			h, err := decodeHeaders(v)
			if err != nil {
				fail(fHeaders, "%v", err)
				continue
			}
			r.Headers = h
		case fPayload:
			payload, havePayld = v, true // decoded below, by its content type
		case fCType:
			if v.Type == bson.TypeNull {
				continue
			}
			s, ok := v.StringValueOK()
			if !ok {
				fail(fCType, "%s, want a string", extJSON(v))
				continue
			}
			r.ContentType = s
		case fCausedBy:
			s, err := stringList(v)
			if err != nil {
				fail(fCausedBy, "%v", err)
				continue
			}
			r.CausedBy = s
		case fTags:
			s, err := stringList(v)
			if err != nil {
				fail(fTags, "%v", err)
				continue
			}
			r.Tags = s
		case fSID:
			if v.Type == bson.TypeNull {
				continue
			}
			s, ok := v.StringValueOK()
			if !ok {
				fail(fSID, "%s, want a string", extJSON(v))
				continue
			}
			r.SID = s
		}
	}
	if havePayld {
		p, err := decodePayload(payload, r.IsBinary())
		if err != nil {
			fail(fPayload, "%v", err)
		}
		r.Payload = p
	}
	switch {
	case fieldErr != nil:
	case !haveSeq:
		fail(fSeq, "missing")
	case r.ID == "":
		fail(fRecID, "missing")
	case !havePayld:
		fail(fPayload, "missing")
	}
	if fieldErr != nil {
		b := &badDoc{docID: docID, recID: r.ID, reason: fmt.Errorf("%w: topic %q, _id %s: %w", ErrBadDocument, topic, docID, fieldErr)}
		if haveSeq {
			b.seq = r.Seq
		}
		return r, b
	}
	return r, nil
}

// intValue returns v as an int64 if it is an integer (a double only when it
// has no fraction).
func intValue(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt64:
		return v.Int64(), true
	case bson.TypeInt32:
		return int64(v.Int32()), true
	case bson.TypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

// decodePayload decodes a stored payload: bytes of any kind for a binary
// record (binary or a string), else JSON text.
func decodePayload(v bson.RawValue, binary bool) (json.RawMessage, error) {
	var p []byte
	switch v.Type {
	case bson.TypeString:
		// The value is an int32 length, the bytes and a NUL; copy the
		// bytes, since v points into the driver's buffer.
		if len(v.Value) < 5 {
			return nil, fmt.Errorf("malformed string")
		}
		p = bytes.Clone(v.Value[4 : len(v.Value)-1])
	case bson.TypeBinary:
		_, data := v.Binary()
		p = bytes.Clone(data)
	case bson.TypeUndefined:
		return nil, fmt.Errorf("undefined")
	case bson.TypeNull:
		if binary {
			return nil, nil
		}
		return json.RawMessage("null"), nil
	default:
		if binary {
			return nil, fmt.Errorf("%s, want binary for a record of a binary content type", v.Type)
		}
		// A document written by hand with a BSON payload: its relaxed
		// extended JSON.
		return json.RawMessage(extJSON(v)), nil
	}
	if !binary && !json.Valid(p) {
		return nil, fmt.Errorf("%.40q is not JSON", p)
	}
	return p, nil
}

func decodeHeaders(v bson.RawValue) (map[string]string, error) {
	switch v.Type {
	case bson.TypeNull:
		return nil, nil
	case bson.TypeEmbeddedDocument: // {name: value}, as a person might write it
		elems, err := v.Document().Elements()
		if err != nil {
			return nil, err
		}
		h := make(map[string]string, len(elems))
		for _, e := range elems {
			s, ok := e.Value().StringValueOK()
			if !ok {
				return nil, fmt.Errorf("header %q is %s, want a string", e.Key(), e.Value().Type)
			}
			h[e.Key()] = s
		}
		return h, nil
	case bson.TypeArray:
		vals, err := v.Array().Values()
		if err != nil {
			return nil, err
		}
		h := make(map[string]string, len(vals))
		for i, x := range vals {
			d, ok := x.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("element %d is %s, want {k, v}", i, x.Type)
			}
			k, okk := d.Lookup("k").StringValueOK()
			val, okv := d.Lookup("v").StringValueOK()
			if !okk || !okv {
				return nil, fmt.Errorf("element %d: want string fields k and v", i)
			}
			h[k] = val
		}
		return h, nil
	}
	return nil, fmt.Errorf("%s, want a list of {k, v}", v.Type)
}

func stringList(v bson.RawValue) ([]string, error) {
	if v.Type == bson.TypeNull {
		return nil, nil
	}
	a, ok := v.ArrayOK()
	if !ok {
		return nil, fmt.Errorf("%s, want an array of strings", v.Type)
	}
	vals, err := a.Values()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(vals))
	for i, x := range vals {
		s, ok := x.StringValueOK()
		if !ok {
			return nil, fmt.Errorf("element %d is %s, want a string", i, x.Type)
		}
		out[i] = s
	}
	return out, nil
}

// extJSON renders v as relaxed extended JSON, which is always valid JSON.
func extJSON(v bson.RawValue) string {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil || len(b) < 6 {
		return "null"
	}
	return string(b[5 : len(b)-1]) // {"v":X}
}
