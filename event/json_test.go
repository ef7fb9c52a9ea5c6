package event

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var jsonSeeds = []string{
	`null`, `true`, `false`, `0`, `-0`, `1.5e10`, `-1.5E-10`, `1e+2`, `"a\"b\\c\/\u00e9\n"`,
	`{}`, `[]`, `{"a":[1,2,{"b":null}]}`, ` {"x" : 1 } `, "\t[\n1 ,2]\r",
	``, ` `, `nul`, `truex`, `01`, `1.`, `.1`, `-`, `1e`, `+1`, `"\x"`, `"\u12"`, `"\u12G4"`,
	`{"a"}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `[1,]`, `[,1]`, `[1 2]`, `"unterminated`, "\"ctl\x01\"",
	"\"\xff\xfe\"", `{"a":1}{"b":2}`, `1 2`, `[[[[]]]]`, `{"a":{"b":{"c":[]}}}`,
	"{\"k\xc3\":1}", "\"\xed\xa0\x80\"", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", `"\ud800"`,
	strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
	strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65),
}

// wantValidJSON is what validJSON must answer: what encoding/json.Valid
// accepts, less invalid UTF-8 (which encoding/json lets through) and
// nesting deeper than MaxJSONDepth (encoding/json allows 10,000).
func wantValidJSON(p []byte) bool {
	return json.Valid(p) && utf8.Valid(p) && nestingOf(p) <= MaxJSONDepth
}

// nestingOf returns how deep the valid JSON p nests.
func nestingOf(p []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

func FuzzValidJSONMatchesEncodingJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if got, want := validJSON(p), wantValidJSON(p); got != want {
			t.Fatalf("validJSON(%q) = %v, want %v (encoding/json.Valid %v, UTF-8 %v, depth %d)",
				p, got, want, json.Valid(p), utf8.Valid(p), nestingOf(p))
		}
	})
}

func TestValidJSONSeeds(t *testing.T) {
	for _, s := range jsonSeeds {
		assert.Equal(t, wantValidJSON([]byte(s)), validJSON([]byte(s)), "%q", s)
	}
}

func TestValidJSONDepth(t *testing.T) {
	for _, depth := range []int{1, MaxJSONDepth - 1, MaxJSONDepth, MaxJSONDepth + 1, 1000, 10000, 10001, 50000} {
		p := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		assert.Equal(t, depth <= MaxJSONDepth, validJSON(p), "depth %d", depth)
		o := []byte(strings.Repeat(`{"a":`, depth) + "null" + strings.Repeat("}", depth))
		assert.Equal(t, depth <= MaxJSONDepth, validJSON(o), "object depth %d", depth)
	}
}

func TestValidatePayloadNamesTheProblem(t *testing.T) {
	for _, tc := range []struct{ p, want string }{
		{"", "empty"},
		{`{"a":`, "not valid JSON"},
		{strings.Repeat("[", 65) + strings.Repeat("]", 65), "nested deeper than 64"},
		{"\"a\xffb\"", "not valid UTF-8 at byte 2"},
		{"{\"\xc3\":1}", "not valid UTF-8 at byte 2"},
	} {
		err := ValidatePayload([]byte(tc.p))
		assert.ErrorIs(t, err, ErrInvalid, "%q", tc.p)
		assert.ErrorIs(t, err, ErrBadJSON, "%q", tc.p)
		assert.ErrorContains(t, err, "payload", "%q", tc.p)
		assert.ErrorContains(t, err, tc.want, "%q", tc.p)
	}
	assert.NoError(t, ValidatePayload([]byte("\"caf\xc3\xa9\"")))
}

func BenchmarkValidJSON(b *testing.B) {
	p := []byte(`{"i":123456,"p":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	b.Run("promlib", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			validJSON(p)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			json.Valid(p)
		}
	})
}

// TestPlainWord holds plainWord to its promise: never yes for a word with
// a byte a string cannot hold as it is, whatever the bytes around it, and
// yes for the plain words of a payload.
func TestPlainWord(t *testing.T) {
	plain := func(w uint64) bool {
		for k := 0; k < 8; k++ {
			if !plainASCII[byte(w>>(8*k))] {
				return false
			}
		}
		return true
	}
	base := binary.LittleEndian.Uint64([]byte("xxxxxxxx"))
	require.True(t, plainWord(base))
	require.True(t, plainWord(binary.LittleEndian.Uint64([]byte(" ~az09!#"))))
	// Any two bytes at any two places: a borrow from one byte into the
	// next is where such a test goes wrong.
	for i := 0; i < 8; i++ {
		for j := i; j < 8; j++ {
			for a := 0; a < 256; a++ {
				for b := 0; b < 256; b++ {
					w := base&^(0xff<<(8*i)) | uint64(a)<<(8*i)
					w = w&^(0xff<<(8*j)) | uint64(b)<<(8*j)
					if plainWord(w) && !plain(w) {
						t.Fatalf("plainWord(%#016x) = true, with a byte that is not plain", w)
					}
				}
			}
		}
	}
	// Words of mostly printable bytes, a few of any value.
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		var w uint64
		for k := 0; k < 8; k++ {
			c := uint64(0x20 + r.IntN(0x5f))
			if r.IntN(6) == 0 {
				c = uint64(r.IntN(256))
			}
			w |= c << (8 * k)
		}
		if plainWord(w) && !plain(w) {
			t.Fatalf("plainWord(%#016x) = true, with a byte that is not plain", w)
		}
	}
}
