package event

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

var jsonSeeds = []string{
	`null`, `true`, `false`, `0`, `-0`, `1.5e10`, `-1.5E-10`, `1e+2`, `"a\"b\\c\/\u00e9\n"`,
	`{}`, `[]`, `{"a":[1,2,{"b":null}]}`, ` {"x" : 1 } `, "\t[\n1 ,2]\r",
	``, ` `, `nul`, `truex`, `01`, `1.`, `.1`, `-`, `1e`, `+1`, `"\x"`, `"\u12"`, `"\u12G4"`,
	`{"a"}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `[1,]`, `[,1]`, `[1 2]`, `"unterminated`, "\"ctl\x01\"",
	"\"\xff\xfe\"", `{"a":1}{"b":2}`, `1 2`, `[[[[]]]]`, `{"a":{"b":{"c":[]}}}`,
}

func FuzzValidJSONMatchesEncodingJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if got, want := validJSON(p), json.Valid(p); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json.Valid = %v", p, got, want)
		}
	})
}

func TestValidJSONSeeds(t *testing.T) {
	for _, s := range jsonSeeds {
		assert.Equal(t, json.Valid([]byte(s)), validJSON([]byte(s)), "%q", s)
	}
}

func TestValidJSONDepth(t *testing.T) {
	for _, depth := range []int{9999, 10000, 10001, 50000} {
		p := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		assert.Equal(t, json.Valid(p), validJSON(p), "depth %d", depth)
	}
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
