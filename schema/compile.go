package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// draft2020 is the $schema of draft 2020-12, the only draft registered.
const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// MaxSchemaBytes bounds a schema document.
const MaxSchemaBytes = 256 << 10

var printer = message.NewPrinter(language.English)

// noLoader refuses every external reference: a registered schema is one
// self-contained document.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q: a schema must be self-contained", url)
}

// decode parses a schema document, keeping numbers exact.
func decode(doc []byte) (any, error) {
	if len(doc) > MaxSchemaBytes {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrBadSchema, len(doc), MaxSchemaBytes)
	}
	if !utf8.Valid(doc) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrBadSchema)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrBadSchema, err)
	}
	return v, nil
}

// compile compiles a decoded schema document as draft 2020-12.
func compile(v any) (*jsonschema.Schema, error) {
	switch d := v.(type) {
	case bool:
	case map[string]any:
		if s, ok := d["$schema"]; ok && s != draft2020 {
			return nil, fmt.Errorf("%w: $schema %v: only draft 2020-12 (%s) is registered", ErrBadSchema, s, draft2020)
		}
	default:
		return nil, fmt.Errorf("%w: a schema is an object or a boolean, not %s", ErrBadSchema, jsonText(v))
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const url = "mem:///schema.json"
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSchema, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSchema, err)
	}
	return s, nil
}

// validAgainst reports whether value is valid under the decoded schema s.
func validAgainst(s any, value any) bool {
	cs, err := compile(s)
	return err == nil && cs.Validate(value) == nil
}

// violation turns a validation error into the pointer and reason of its
// first leaf.
func violation(err error) (pointer, reason string) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "", err.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	var sb strings.Builder
	for _, tok := range ve.InstanceLocation {
		sb.WriteByte('/')
		sb.WriteString(escape(tok))
	}
	return sb.String(), ve.ErrorKind.LocalizedString(printer)
}

// validatePayload validates a JSON payload under s.
func validatePayload(s *jsonschema.Schema, payload json.RawMessage) (pointer, reason string, ok bool) {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return "", "not JSON: " + err.Error(), false
	}
	if err := s.Validate(inst); err != nil {
		p, r := violation(err)
		return p, r, false
	}
	return "", "", true
}
