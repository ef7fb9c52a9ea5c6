package event

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrBadJSON is wrapped, with [ErrInvalid], by every error about text a
// record may not hold: a payload that is not one JSON value, that nests
// deeper than [MaxJSONDepth] or that is not valid UTF-8, and a key, header,
// tag, caused_by, sid or id that is not valid UTF-8. Records go out in
// WebSocket text frames, which a browser closes on invalid UTF-8, so such
// text is refused before it is stored. The gateway answers it bad_json.
var ErrBadJSON = errors.New("not valid JSON text")

// badJSON builds an error that wraps ErrInvalid and ErrBadJSON and names
// the field.
func badJSON(field, format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s: %s", ErrInvalid, ErrBadJSON, field, fmt.Sprintf(format, args...))
}

// ValidatePayload reports whether p can be the payload of a record: one
// JSON value of valid UTF-8, nested at most [MaxJSONDepth] levels. The
// error wraps [ErrInvalid] and [ErrBadJSON] and says what is wrong.
func ValidatePayload(p []byte) error {
	if len(p) == 0 {
		return badJSON("payload", "empty; want a JSON value (null is one)")
	}
	v := jsonValidator{p: p}
	if v.valid() {
		return nil
	}
	switch v.problem {
	case jsonDepth:
		return badJSON("payload", "nested deeper than %d levels (MaxJSONDepth)", MaxJSONDepth)
	case jsonBadUTF8:
		return badJSON("payload", "not valid UTF-8 at byte %d", v.i)
	}
	return badJSON("payload", "not valid JSON (near byte %d)", min(v.i, len(p)))
}

// validateText reports the text fields of o that are not valid UTF-8.
func (o *PublishOptions) validateText() []error {
	var errs []error
	bad := func(field, s string) {
		errs = append(errs, badJSON(field, "%q is not valid UTF-8", truncateText(s, 64)))
	}
	for _, f := range [...]struct{ name, s string }{{"id", o.ID}, {"key", o.Key}, {"sid", o.SID}} {
		if !utf8.ValidString(f.s) {
			bad(f.name, f.s)
		}
	}
	for k, v := range o.Headers {
		if !utf8.ValidString(k) {
			bad("headers", k)
		}
		if !utf8.ValidString(v) {
			bad(fmt.Sprintf("headers[%q]", truncateText(k, 64)), v)
		}
	}
	for i, t := range o.Tags {
		if !utf8.ValidString(t) {
			bad(fmt.Sprintf("tags[%d]", i), t)
		}
	}
	for i, id := range o.CausedBy {
		if !utf8.ValidString(id) {
			bad(fmt.Sprintf("caused_by[%d]", i), id)
		}
	}
	return errs
}

// validateRecord checks what [Bus.NewRecord] checks of a record given to
// [Bus.Append]: its payload and text fields (the store checks its topic).
func validateRecord(r *Record) error {
	o := PublishOptions{ID: r.ID, TS: r.TS, Key: r.Key, Headers: r.Headers, Tags: r.Tags, CausedBy: r.CausedBy, SID: r.SID, ContentType: r.ContentType}
	if err := o.Validate(); err != nil {
		return err
	}
	return checkPayload(r.Payload, r.ContentType)
}

// truncateText cuts s to at most n bytes for an error message.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
