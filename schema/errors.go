package schema

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels, for errors.Is.
var (
	// ErrInvalid is wrapped by every error about a bad argument or
	// setting; the message names it.
	ErrInvalid = errors.New("schema: invalid argument")
	// ErrBadSchema: the schema is not a JSON Schema (draft 2020-12) that
	// compiles; the message says why.
	ErrBadSchema = errors.New("schema: bad schema")
	// ErrUnsupportedKeyword: under a rule other than none, a schema uses a
	// keyword outside the subset the compatibility checker knows
	// ([Keywords]); the error is a [*KeywordError].
	ErrUnsupportedKeyword = errors.New("schema: keyword outside the checked subset")
	// ErrIncompatible: the new version breaks the topic's evolution rule;
	// the error is an [*IncompatibleError].
	ErrIncompatible = errors.New("schema: incompatible schema")
	// ErrPayloadInvalid: a payload does not match its topic's schema; the
	// error is a [*ValidationError].
	ErrPayloadInvalid = errors.New("schema: payload does not match the schema")
	// ErrVersionExists: a [Store] already holds that version of the topic
	// (another writer registered it first).
	ErrVersionExists = errors.New("schema: version exists")
	// ErrNotFound: the topic has no schema.
	ErrNotFound = errors.New("schema: no schema")
)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// ValidationError is the error of a publish whose payload does not match
// the topic's current schema. It matches [ErrPayloadInvalid].
type ValidationError struct {
	Topic   string
	Version int
	// Pointer is the JSON pointer (RFC 6901) of the offending value in the
	// payload, "" for the payload itself.
	Pointer string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("schema: topic %s schema v%d refuses the payload at %q: %s", e.Topic, e.Version, e.Pointer, e.Reason)
}

// Is makes errors.Is(err, ErrPayloadInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrPayloadInvalid }

// SchemaViolation returns the pointer and the reason; the gateway answers
// an error that has this method with ERR schema_invalid (HTTP 422).
func (e *ValidationError) SchemaViolation() (pointer, reason string) { return e.Pointer, e.Reason }

// KeywordError names a keyword outside the checked subset and where it
// is. It matches [ErrUnsupportedKeyword].
type KeywordError struct {
	Keyword string
	// Location is the JSON pointer of the schema object that uses it.
	Location string
}

func (e *KeywordError) Error() string {
	return fmt.Sprintf("schema: keyword %q (at %q) is outside the subset the compatibility checker supports; use rule none, or see schema.Keywords", e.Keyword, e.Location)
}

// Is makes errors.Is(err, ErrUnsupportedKeyword) true.
func (e *KeywordError) Is(target error) bool { return target == ErrUnsupportedKeyword }

// IncompatibleError says why a new version breaks the rule. It matches
// [ErrIncompatible].
type IncompatibleError struct {
	Topic string
	Rule  Rule
	// Reasons are the checker's findings, each with the JSON pointer of
	// the schema location it is about.
	Reasons []string
}

func (e *IncompatibleError) Error() string {
	topic := ""
	if e.Topic != "" {
		topic = "topic " + e.Topic + ": "
	}
	return fmt.Sprintf("schema: %sthe new schema breaks rule %s: %s", topic, e.Rule, strings.Join(e.Reasons, "; "))
}

// Is makes errors.Is(err, ErrIncompatible) true.
func (e *IncompatibleError) Is(target error) bool { return target == ErrIncompatible }
