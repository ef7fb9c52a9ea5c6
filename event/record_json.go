package event

import (
	"encoding/base64"
	"strconv"

	"github.com/promethean/promlib/internal/jsonenc"
)

// AppendRecordJSON appends r as JSON, by hand (records are written on the
// hot paths of delivery and export): the fields with the names of
// Record's tags, in its order, escaped as encoding/json escapes. A binary
// payload ([Record.IsBinary]) is written as a base64 string followed by
// "payload_encoding": "base64"; an empty JSON payload as null. A test
// holds it equal to encoding/json's output of the same fields.
func AppendRecordJSON(b []byte, r *Record) []byte {
	b = append(b, `{"id":`...)
	b = jsonenc.String(b, r.ID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, r.TS, 10)
	b = append(b, `,"topic":`...)
	b = jsonenc.String(b, r.Topic)
	if r.Key != "" {
		b = append(b, `,"key":`...)
		b = jsonenc.String(b, r.Key)
	}
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	if len(r.Headers) > 0 {
		b = append(b, `,"headers":`...)
		b = jsonenc.StringMap(b, r.Headers)
	}
	b = append(b, `,"payload":`...)
	switch {
	case r.IsBinary():
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, r.Payload)
		b = append(b, `","payload_encoding":"base64"`...)
	case len(r.Payload) == 0:
		b = append(b, "null"...)
	default:
		b = append(b, r.Payload...)
	}
	if r.ContentType != "" {
		b = append(b, `,"content_type":`...)
		b = jsonenc.String(b, r.ContentType)
	}
	if len(r.CausedBy) > 0 {
		b = append(b, `,"caused_by":`...)
		b = jsonenc.Strings(b, r.CausedBy)
	}
	if len(r.Tags) > 0 {
		b = append(b, `,"tags":`...)
		b = jsonenc.Strings(b, r.Tags)
	}
	if r.SID != "" {
		b = append(b, `,"sid":`...)
		b = jsonenc.String(b, r.SID)
	}
	return append(b, '}')
}
