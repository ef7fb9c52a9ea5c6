package schema

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompatibleTable(t *testing.T) {
	t.Parallel()
	obj := `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`
	tests := []struct {
		name       string
		prev, next string
		// ok per rule: backward, forward, full
		backward, forward bool
	}{
		{"same", obj, obj, true, true},
		{"optional field added to a closed object", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"additionalProperties":false}`, true, false},
		// The open object accepted any "b"; the new one only integers.
		{"typed field added to an open object", obj, `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}`, false, true},
		{"required field added", obj, `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}`, false, true},
		{"required dropped", obj, `{"type":"object","properties":{"a":{"type":"string"}}}`, true, false},
		{"type widened", `{"type":"integer"}`, `{"type":"number"}`, true, false},
		{"type narrowed", `{"type":["string","null"]}`, `{"type":"string"}`, false, true},
		{"enum grows", `{"enum":["a","b"]}`, `{"enum":["a","b","c"]}`, true, false},
		{"const in enum", `{"const":"a"}`, `{"enum":["a","b"]}`, true, false},
		{"minimum relaxed", `{"type":"number","minimum":5}`, `{"type":"number","minimum":0}`, true, false},
		{"exclusive vs inclusive", `{"type":"number","exclusiveMinimum":0}`, `{"type":"number","minimum":0}`, true, false},
		{"maxLength tightened", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, false, true},
		{"pattern added", `{"type":"string"}`, `{"type":"string","pattern":"^a"}`, false, true},
		{"items narrowed", `{"type":"array","items":{"type":"number"}}`, `{"type":"array","items":{"type":"integer"}}`, false, true},
		{"closed to open", `{"type":"object","additionalProperties":false}`, `{"type":"object"}`, true, false},
		{"open gains typed property", `{"type":"object"}`, `{"type":"object","properties":{"x":{"type":"string"}}}`, false, true},
		{"true to false", `true`, `false`, false, true},
		{"annotations only", `{"title":"x","type":"string"}`, `{"description":"y","type":"string","format":"email"}`, true, true},
		{"nested property type", `{"type":"object","properties":{"p":{"type":"object","properties":{"q":{"type":"integer"}}}}}`,
			`{"type":"object","properties":{"p":{"type":"object","properties":{"q":{"type":"string"}}}}}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check := func(rule Rule, want bool) {
				err := Compatible(rule, json.RawMessage(tt.prev), json.RawMessage(tt.next))
				if want {
					assert.NoError(t, err, "rule %s", rule)
				} else {
					assert.ErrorIs(t, err, ErrIncompatible, "rule %s", rule)
				}
			}
			check(RuleNone, true)
			check(RuleBackward, tt.backward)
			check(RuleForward, tt.forward)
			check(RuleFull, tt.backward && tt.forward)
		})
	}
}

func TestCompatibleRefusesKeywordsOutsideTheSubset(t *testing.T) {
	t.Parallel()
	for _, kw := range []string{"oneOf", "$ref", "patternProperties", "multipleOf", "if"} {
		doc := fmt.Sprintf(`{"type":"object","properties":{"a":{%q:[{"type":"string"}]}}}`, kw)
		if kw == "$ref" || kw == "multipleOf" || kw == "if" {
			doc = fmt.Sprintf(`{"type":"object","properties":{"a":{%q:%s}}}`, kw, map[string]string{"$ref": `"#"`, "multipleOf": "2", "if": "true"}[kw])
		}
		err := Compatible(RuleBackward, json.RawMessage(`{"type":"object"}`), json.RawMessage(doc))
		var ke *KeywordError
		require.ErrorAs(t, err, &ke, kw)
		assert.Equal(t, kw, ke.Keyword)
		assert.Equal(t, "/properties/a", ke.Location)
		assert.ErrorIs(t, err, ErrUnsupportedKeyword)
		assert.Contains(t, err.Error(), kw)
		assert.NoError(t, Compatible(RuleNone, json.RawMessage(`{"type":"object"}`), json.RawMessage(doc)))
	}
}

// TestCompatibleGenerated checks the checker against the validator: for
// random pairs of schemas of the subset, whenever the checker calls a pair
// compatible under a rule, no generated instance valid under the side that
// must be covered is invalid under the other.
func TestCompatibleGenerated(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(19, 2026))
	instances := make([]any, 0, 1500)
	for range cap(instances) {
		instances = append(instances, genValue(rng, 3))
	}
	proved, covered := map[Rule]int{}, 0
	for i := range 300 {
		a, b := genSchema(rng, 2), genSchema(rng, 2)
		if rng.IntN(3) == 0 {
			b = mutate(rng, a)
		}
		ja, jb := mustJSON(t, a), mustJSON(t, b)
		sa, sb := mustCompile(t, ja), mustCompile(t, jb)
		for _, rule := range []Rule{RuleBackward, RuleForward, RuleFull} {
			err := Compatible(rule, ja, jb)
			if err != nil {
				require.ErrorIs(t, err, ErrIncompatible, "pair %d %s %s", i, ja, jb)
				continue
			}
			proved[rule]++
			for _, inst := range instances {
				va, vb := sa.Validate(inst) == nil, sb.Validate(inst) == nil
				if va || vb {
					covered++
				}
				if rule != RuleForward && va && !vb {
					t.Fatalf("rule %s: %s valid under %s, invalid under %s", rule, jsonText(inst), ja, jb)
				}
				if rule != RuleBackward && vb && !va {
					t.Fatalf("rule %s: %s valid under %s, invalid under %s", rule, jsonText(inst), jb, ja)
				}
			}
		}
	}
	assert.Greater(t, covered, 10000, "too few instances valid under a proved pair")
	t.Logf("pairs proved: %v; instances checked valid under a proved pair: %d", proved, covered)
	for _, rule := range []Rule{RuleBackward, RuleForward, RuleFull} {
		assert.Greater(t, proved[rule], 20, "too few pairs proved %s to test anything", rule)
	}
}

var (
	genKeys    = []string{"a", "b", "c"}
	genStrings = []any{"", "a", "ab", "abc", "b", "bbbb"}
	genNumbers = []any{json.Number("-1"), json.Number("0"), json.Number("1"), json.Number("1.5"), json.Number("2"), json.Number("10")}
	genTypes   = []string{"null", "boolean", "object", "array", "number", "integer", "string"}
)

func genValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(7)
	if depth == 0 {
		k = rng.IntN(4)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return genNumbers[rng.IntN(len(genNumbers))]
	case 3:
		return genStrings[rng.IntN(len(genStrings))]
	case 4:
		arr := make([]any, rng.IntN(4))
		for i := range arr {
			arr[i] = genValue(rng, depth-1)
		}
		return arr
	default:
		obj := map[string]any{}
		for _, key := range genKeys {
			if rng.IntN(2) == 0 {
				obj[key] = genValue(rng, depth-1)
			}
		}
		return obj
	}
}

func genSchema(rng *rand.Rand, depth int) any {
	if rng.IntN(10) == 0 {
		return rng.IntN(4) != 0
	}
	s := map[string]any{}
	switch rng.IntN(8) {
	case 0:
		s["enum"] = []any{genValue(rng, 1), genValue(rng, 1)}
		return s
	case 1:
		s["const"] = genValue(rng, 1)
		return s
	case 2: // no type
	default:
		t := genTypes[rng.IntN(len(genTypes))]
		if depth == 0 && (t == "object" || t == "array") {
			t = "string"
		}
		if rng.IntN(4) == 0 {
			u := genTypes[rng.IntN(len(genTypes))]
			if u == t {
				s["type"] = t
			} else {
				s["type"] = []any{t, u}
			}
		} else {
			s["type"] = t
		}
	}
	if rng.IntN(3) == 0 {
		s["minimum"] = genNumbers[rng.IntN(len(genNumbers))]
	}
	if rng.IntN(4) == 0 {
		s["exclusiveMaximum"] = genNumbers[rng.IntN(len(genNumbers))]
	}
	if rng.IntN(3) == 0 {
		s["maxLength"] = rng.IntN(4)
	}
	if rng.IntN(4) == 0 {
		s["minLength"] = rng.IntN(3)
	}
	if rng.IntN(6) == 0 {
		s["pattern"] = "^a"
	}
	if depth > 0 {
		if rng.IntN(2) == 0 {
			s["items"] = genSchema(rng, depth-1)
		}
		if rng.IntN(3) == 0 {
			s["maxItems"] = rng.IntN(3)
		}
		if rng.IntN(2) == 0 {
			props := map[string]any{}
			for _, k := range genKeys {
				if rng.IntN(2) == 0 {
					props[k] = genSchema(rng, depth-1)
				}
			}
			s["properties"] = props
		}
		if rng.IntN(3) == 0 {
			s["required"] = []any{genKeys[rng.IntN(len(genKeys))]}
		}
		if rng.IntN(4) == 0 {
			s["additionalProperties"] = genSchema(rng, depth-1)
		}
	}
	return s
}

// mutate returns a copy of s with one keyword dropped, changed or added,
// so that pairs are often close (and so often compatible).
func mutate(rng *rand.Rand, s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	switch {
	case len(keys) > 0 && rng.IntN(2) == 0:
		delete(out, keys[rng.IntN(len(keys))])
	case rng.IntN(2) == 0:
		out["maxLength"] = rng.IntN(5)
	default:
		out["minimum"] = genNumbers[rng.IntN(len(genNumbers))]
	}
	return out
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func mustCompile(t *testing.T, doc json.RawMessage) interface{ Validate(any) error } {
	t.Helper()
	d, err := decode(doc)
	require.NoError(t, err)
	s, err := compile(d)
	require.NoError(t, err, strings.TrimSpace(string(doc)))
	return s
}
