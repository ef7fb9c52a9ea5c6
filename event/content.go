package event

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"strings"
	"unicode/utf8"
)

// Content types of payloads.
const (
	// ContentTypeJSON is the default content type: a record whose
	// ContentType is empty holds JSON.
	ContentTypeJSON = "application/json"
	// ContentTypeBinary is the content type of bytes of no more precise
	// type.
	ContentTypeBinary = "application/octet-stream"
	// PayloadEncodingBase64 is the "payload_encoding" of a binary payload
	// in JSON: the payload is a string of its bytes in standard base64
	// (RFC 4648 §4, with padding).
	PayloadEncodingBase64 = "base64"
	// MaxContentTypeLen is the longest content type a record may have.
	MaxContentTypeLen = 255
)

// IsJSONContentType reports whether ct names JSON: empty,
// application/json, or a type with the +json suffix, whatever its
// parameters. A payload of such a type must be one JSON value
// ([ValidatePayload]).
func IsJSONContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt := mediaType(ct)
	return mt == ContentTypeJSON || strings.HasSuffix(mt, "+json")
}

// IsTextContentType reports whether ct names text (text/*): a payload of
// such a type must be valid UTF-8, as every text in a record must.
func IsTextContentType(ct string) bool {
	return strings.HasPrefix(mediaType(ct), "text/")
}

// mediaType returns the lower-case type/subtype of ct, without parameters.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// IsBinary reports whether r's payload is bytes rather than JSON: its
// ContentType names a type other than JSON.
func (r *Record) IsBinary() bool { return !IsJSONContentType(r.ContentType) }

// validateContentType reports whether ct can be a record's content type: a
// media type (RFC 2045) of valid UTF-8, at most MaxContentTypeLen bytes.
func validateContentType(ct string) error {
	switch {
	case ct == "":
		return nil
	case len(ct) > MaxContentTypeLen:
		return invalid("content_type", "%d bytes, more than %d", len(ct), MaxContentTypeLen)
	case !utf8.ValidString(ct):
		return badJSON("content_type", "%q is not valid UTF-8", truncateText(ct, 64))
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil || !strings.Contains(ct, "/") {
		return invalid("content_type", "%q is not a media type (want type/subtype, such as %s)", truncateText(ct, 64), ContentTypeBinary)
	}
	return nil
}

// ValidatePayloadAs reports whether p can be the payload of a record of
// content type ct: one JSON value for a JSON type ([ValidatePayload]),
// valid UTF-8 for a text type, and any bytes for other types. The error
// wraps [ErrInvalid] and, for text, [ErrBadJSON].
func ValidatePayloadAs(p []byte, ct string) error {
	switch {
	case IsJSONContentType(ct):
		return ValidatePayload(p)
	case IsTextContentType(ct):
		if !utf8.Valid(p) {
			n := 0
			for n < len(p) {
				r, size := utf8.DecodeRune(p[n:])
				if r == utf8.RuneError && size == 1 {
					break
				}
				n += size
			}
			return badJSON("payload", "content type %q: not valid UTF-8 at byte %d", truncateText(ct, 64), n)
		}
	}
	return nil
}

// plainRecord is Record without its JSON methods.
type plainRecord Record

// MarshalJSON writes r as [AppendRecordJSON] does.
func (r Record) MarshalJSON() ([]byte, error) {
	return AppendRecordJSON(nil, &r), nil
}

// UnmarshalJSON reads what MarshalJSON writes. A payload marked
// "payload_encoding": "base64" must be a base64 string and its record of a
// binary content type (none means application/octet-stream); an unknown
// encoding, or a binary content type without the marker, is an error that
// names the field.
func (r *Record) UnmarshalJSON(b []byte) error {
	var w struct {
		plainRecord
		PayloadEncoding *string `json:"payload_encoding"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	rec := Record(w.plainRecord)
	if w.PayloadEncoding == nil {
		if rec.IsBinary() {
			return invalid("payload_encoding", "missing; content type %q is binary and needs %q", truncateText(rec.ContentType, 64), PayloadEncodingBase64)
		}
		*r = rec
		return nil
	}
	p, err := DecodePayload(rec.Payload, *w.PayloadEncoding, rec.ContentType)
	if err != nil {
		return err
	}
	rec.Payload = p
	if rec.ContentType == "" {
		rec.ContentType = ContentTypeBinary
	}
	*r = rec
	return nil
}

// DecodePayload decodes the JSON payload raw of a record or frame marked
// with the payload_encoding enc: for base64, raw must be a JSON string of
// standard base64, and ct (the content type beside it, if any) a binary
// type. It returns the bytes; the error wraps [ErrInvalid] and names the
// field.
func DecodePayload(raw json.RawMessage, enc, ct string) ([]byte, error) {
	if enc != PayloadEncodingBase64 {
		return nil, invalid("payload_encoding", "%q is unknown (want %q)", truncateText(enc, 32), PayloadEncodingBase64)
	}
	if ct != "" && IsJSONContentType(ct) {
		return nil, invalid("payload_encoding", "%q with content type %q: JSON payloads are sent as JSON, not encoded", enc, truncateText(ct, 64))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || len(raw) == 0 || raw[0] != '"' {
		return nil, invalid("payload", "want a base64 string with payload_encoding %q", enc)
	}
	p, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, invalid("payload", "not valid base64: %v", err)
	}
	return p, nil
}
