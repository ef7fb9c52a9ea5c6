package event

import (
	"encoding/binary"
	"unicode/utf8"
)

// MaxJSONDepth is how deep a payload's arrays and objects may nest: 64
// levels (`[[1]]` is 2). Publish refuses deeper payloads (the gateway too,
// on HTTP and WebSocket), so that every stored payload decodes in every
// client, whatever its decoder's limit, and no hostile payload can exhaust
// a stack.
const MaxJSONDepth = 64

// validJSON reports whether p is exactly one JSON value (RFC 8259), with
// optional surrounding white space, of valid UTF-8 and nested at most
// MaxJSONDepth levels. It accepts what encoding/json.Valid accepts, less
// invalid UTF-8 (which encoding/json lets through) and deeper nesting (a
// fuzz test holds them equal so), at a fraction of its cost, since every
// publish validates its payload.
func validJSON(p []byte) bool {
	v := jsonValidator{p: p}
	return v.valid()
}

// jsonProblem is why validJSON refused p.
type jsonProblem int

const (
	jsonSyntax  jsonProblem = iota // not JSON
	jsonDepth                      // nested deeper than MaxJSONDepth
	jsonBadUTF8                    // a string holds bytes that are not UTF-8
)

type jsonValidator struct {
	p       []byte
	i       int
	problem jsonProblem
}

func (v *jsonValidator) valid() bool {
	v.space()
	if !v.value(0) {
		return false
	}
	v.space()
	return v.i == len(v.p)
}

func (v *jsonValidator) space() {
	for v.i < len(v.p) {
		switch v.p[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

func (v *jsonValidator) value(depth int) bool {
	if v.i >= len(v.p) {
		return false
	}
	switch c := v.p[v.i]; {
	case c == '{':
		return v.nest(depth) && v.object(depth+1)
	case c == '[':
		return v.nest(depth) && v.array(depth+1)
	case c == '"':
		return v.string()
	case c == '-' || c >= '0' && c <= '9':
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

// nest reports whether a value at depth may open an array or object.
func (v *jsonValidator) nest(depth int) bool {
	if depth < MaxJSONDepth {
		return true
	}
	v.problem = jsonDepth
	return false
}

func (v *jsonValidator) literal(lit string) bool {
	if len(v.p)-v.i < len(lit) || string(v.p[v.i:v.i+len(lit)]) != lit {
		return false
	}
	v.i += len(lit)
	return true
}

func (v *jsonValidator) object(depth int) bool {
	v.i++ // {
	v.space()
	if v.i < len(v.p) && v.p[v.i] == '}' {
		v.i++
		return true
	}
	for {
		v.space()
		if v.i >= len(v.p) || v.p[v.i] != '"' || !v.string() {
			return false
		}
		v.space()
		if v.i >= len(v.p) || v.p[v.i] != ':' {
			return false
		}
		v.i++
		v.space()
		if !v.value(depth) {
			return false
		}
		v.space()
		if v.i >= len(v.p) {
			return false
		}
		switch v.p[v.i] {
		case ',':
			v.i++
		case '}':
			v.i++
			return true
		default:
			return false
		}
	}
}

func (v *jsonValidator) array(depth int) bool {
	v.i++ // [
	v.space()
	if v.i < len(v.p) && v.p[v.i] == ']' {
		v.i++
		return true
	}
	for {
		v.space()
		if !v.value(depth) {
			return false
		}
		v.space()
		if v.i >= len(v.p) {
			return false
		}
		switch v.p[v.i] {
		case ',':
			v.i++
		case ']':
			v.i++
			return true
		default:
			return false
		}
	}
}

// plainASCII marks the bytes a string holds as they are: printable
// ASCII but the quote and the backslash.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// The words of eight bytes plainWord tests, each byte repeated.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainWord reports whether every byte of the eight in w (read in either
// byte order) is plain: printable ASCII but the quote and the backslash.
// It may answer no for a plain word (the caller then looks at each byte),
// never yes for one that is not. Strings are most of a payload's bytes,
// and this reads them a word at a time.
func plainWord(w uint64) bool {
	// A byte b of w is below 0x20 when b - 0x20 borrows: (w - 0x20...)
	// sets its high bit where ^w keeps it (b < 0x80). Equality to a byte
	// is a zero byte of w ^ that byte, found the same way.
	low := (w - 0x20*ones) &^ w
	q := w ^ '"'*ones
	bs := w ^ '\\'*ones
	quote := (q - ones) &^ q
	slash := (bs - ones) &^ bs
	return (low|quote|slash|w)&highs == 0
}

func (v *jsonValidator) string() bool {
	v.i++ // opening quote
	p, i := v.p, v.i
	for i+8 <= len(p) && plainWord(binary.LittleEndian.Uint64(p[i:])) {
		i += 8
	}
	v.i = i
	for v.i < len(v.p) {
		c := v.p[v.i]
		if plainASCII[c] {
			v.i++
			continue
		}
		switch {
		case c == '"':
			v.i++
			return true
		case c == '\\':
			if v.i+1 >= len(v.p) {
				return false
			}
			switch v.p[v.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				v.i += 2
			case 'u':
				if v.i+6 > len(v.p) {
					return false
				}
				for _, h := range v.p[v.i+2 : v.i+6] {
					if _, ok := unhexAny(h); !ok {
						return false
					}
				}
				v.i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		case c < utf8.RuneSelf:
			v.i++
		default:
			// Unlike encoding/json, which lets them through (a decoder
			// replaces them with U+FFFD), bytes that are not valid UTF-8
			// are refused: the payload goes out in WebSocket text frames,
			// which a browser closes on invalid UTF-8.
			r, size := utf8.DecodeRune(v.p[v.i:])
			if r == utf8.RuneError && size == 1 {
				v.problem = jsonBadUTF8
				return false
			}
			v.i += size
		}
	}
	return false
}

func (v *jsonValidator) number() bool {
	p := v.p
	if p[v.i] == '-' {
		v.i++
	}
	if v.i >= len(p) {
		return false
	}
	switch {
	case p[v.i] == '0':
		v.i++
	case p[v.i] >= '1' && p[v.i] <= '9':
		for v.i < len(p) && p[v.i] >= '0' && p[v.i] <= '9' {
			v.i++
		}
	default:
		return false
	}
	if v.i < len(p) && p[v.i] == '.' {
		v.i++
		if !v.digits() {
			return false
		}
	}
	if v.i < len(p) && (p[v.i] == 'e' || p[v.i] == 'E') {
		v.i++
		if v.i < len(p) && (p[v.i] == '+' || p[v.i] == '-') {
			v.i++
		}
		if !v.digits() {
			return false
		}
	}
	return true
}

func (v *jsonValidator) digits() bool {
	start := v.i
	for v.i < len(v.p) && v.p[v.i] >= '0' && v.p[v.i] <= '9' {
		v.i++
	}
	return v.i > start
}

func unhexAny(c byte) (byte, bool) {
	if c >= 'A' && c <= 'F' {
		return c - 'A' + 10, true
	}
	return unhex(c)
}
