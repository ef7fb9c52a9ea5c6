package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Rule is a topic's evolution rule: how a new version must relate to the
// one before it.
type Rule string

// The evolution rules.
const (
	// RuleNone checks nothing: any schema may follow any other.
	RuleNone Rule = "none"
	// RuleBackward: the new version accepts every payload valid under the
	// previous one, so consumers on the new schema read old events.
	RuleBackward Rule = "backward"
	// RuleForward: the previous version accepts every payload valid under
	// the new one, so consumers still on the old schema read new events.
	RuleForward Rule = "forward"
	// RuleFull: both backward and forward.
	RuleFull Rule = "full"
)

// Validate reports whether r is one of the rules.
func (r Rule) Validate() error {
	switch r {
	case RuleNone, RuleBackward, RuleForward, RuleFull:
		return nil
	}
	return invalid("rule", "%q is not none, backward, forward or full", string(r))
}

// Keywords are the keywords the compatibility checker understands: a
// schema registered under a rule other than none may use only these.
// Annotations are ignored by validation (format included: it is not
// asserted). Booleans are schemas too (true, false).
var Keywords = struct {
	Assertions  []string
	Annotations []string
}{
	Assertions: []string{
		"type", "enum", "const",
		"properties", "required", "additionalProperties",
		"items", "minItems", "maxItems",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
		"minLength", "maxLength", "pattern",
	},
	Annotations: []string{
		"$schema", "$id", "$comment", "title", "description", "default",
		"examples", "deprecated", "readOnly", "writeOnly", "format",
	},
}

var knownKeyword = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range Keywords.Assertions {
		m[k] = true
	}
	for _, k := range Keywords.Annotations {
		m[k] = true
	}
	return m
}()

// checkSubset returns a [*KeywordError] for the first keyword of doc (a
// decoded schema) outside [Keywords], in document order of pointers.
func checkSubset(doc any, loc string) error {
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil // a boolean schema
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !knownKeyword[k] {
			return &KeywordError{Keyword: k, Location: loc}
		}
	}
	if props, ok := obj["properties"].(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if err := checkSubset(props[k], loc+"/properties/"+escape(k)); err != nil {
				return err
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if sub, ok := obj[k]; ok {
			if err := checkSubset(sub, loc+"/"+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// Compatible reports whether next may follow prev under rule: nil, or an
// [*IncompatibleError] with the reasons, or a [*KeywordError] when either
// uses a keyword outside [Keywords], or an error matching [ErrBadSchema].
// The check is sound but not complete: when it cannot prove a property it
// refuses, naming the keyword that stops it.
func Compatible(rule Rule, prev, next json.RawMessage) error {
	if err := rule.Validate(); err != nil {
		return err
	}
	if rule == RuleNone {
		return nil
	}
	a, err := decode(prev)
	if err != nil {
		return err
	}
	b, err := decode(next)
	if err != nil {
		return err
	}
	for _, d := range []any{a, b} {
		if err := checkSubset(d, ""); err != nil {
			return err
		}
	}
	var c checker
	if rule == RuleBackward || rule == RuleFull {
		c.dir = "backward (the new version must accept every payload the previous one accepts)"
		c.sub(a, b, "")
	}
	if rule == RuleForward || rule == RuleFull {
		c.dir = "forward (the previous version must accept every payload the new one accepts)"
		c.sub(b, a, "")
	}
	if len(c.reasons) > 0 {
		return &IncompatibleError{Rule: rule, Reasons: c.reasons}
	}
	return nil
}

// checker proves L(a) ⊆ L(b) for schemas of the subset, or notes why it
// cannot.
type checker struct {
	dir     string
	reasons []string
}

func (c *checker) fail(loc, format string, args ...any) {
	if loc == "" {
		loc = "/"
	}
	c.reasons = append(c.reasons, fmt.Sprintf("%s: at %s: %s", c.dir, loc, fmt.Sprintf(format, args...)))
}

// node is a schema of the subset, its assertions gathered.
type node struct {
	never    bool            // false: accepts nothing
	types    map[string]bool // nil: any type
	enum     []any           // with hasEnum: only these values (const too)
	hasEnum  bool
	min, max *bound
	minLen   int
	maxLen   *int
	pattern  *string
	items    any
	minItems int
	maxItems *int
	props    map[string]any
	required []string
	addl     any
}

type bound struct {
	v    float64
	excl bool
}

var allTypes = []string{"null", "boolean", "object", "array", "number", "string"}

func parseNode(s any) node {
	n := node{items: true, addl: true}
	switch s := s.(type) {
	case bool:
		n.never = !s
		return n
	case map[string]any:
		if t, ok := s["type"]; ok {
			n.types = map[string]bool{}
			switch t := t.(type) {
			case string:
				n.types[t] = true
			case []any:
				for _, x := range t {
					if x, ok := x.(string); ok {
						n.types[x] = true
					}
				}
			}
		}
		if e, ok := s["enum"].([]any); ok {
			n.enum, n.hasEnum = e, true
		}
		if cv, ok := s["const"]; ok {
			// With enum too, const alone still bounds what is accepted.
			n.enum, n.hasEnum = []any{cv}, true
		}
		n.min = tighter(num(s["minimum"]), num(s["exclusiveMinimum"]), true)
		n.max = tighter(num(s["maximum"]), num(s["exclusiveMaximum"]), false)
		if v := num(s["minLength"]); v != nil {
			n.minLen = int(*v)
		}
		n.maxLen = intp(num(s["maxLength"]))
		if p, ok := s["pattern"].(string); ok {
			n.pattern = &p
		}
		n.items = orTrue(s["items"])
		if v := num(s["minItems"]); v != nil {
			n.minItems = int(*v)
		}
		n.maxItems = intp(num(s["maxItems"]))
		n.props, _ = s["properties"].(map[string]any)
		if r, ok := s["required"].([]any); ok {
			for _, x := range r {
				if x, ok := x.(string); ok {
					n.required = append(n.required, x)
				}
			}
		}
		n.addl = orTrue(s["additionalProperties"])
	}
	return n
}

// accepts reports whether the type set of n admits t ("integer" is a
// number).
func (n node) accepts(t string) bool {
	if n.types == nil {
		return true
	}
	if t == "integer" {
		return n.types["integer"] || n.types["number"]
	}
	return n.types[t]
}

// trivial reports whether n accepts everything.
func (n node) trivial() bool {
	return !n.never && n.types == nil && !n.hasEnum && n.min == nil && n.max == nil &&
		n.minLen == 0 && n.maxLen == nil && n.pattern == nil && isTrue(n.items) &&
		n.minItems == 0 && n.maxItems == nil && len(n.props) == 0 && len(n.required) == 0 && isTrue(n.addl)
}

func (c *checker) sub(as, bs any, loc string) {
	a, b := parseNode(as), parseNode(bs)
	switch {
	case a.never || b.trivial():
		return
	case b.never:
		c.fail(loc, "one side accepts nothing (false) where the other accepts values")
		return
	case a.hasEnum:
		// a accepts at most its enum values: check each against b.
		for _, v := range a.enum {
			if !validAgainst(bs, v) {
				c.fail(loc, "value %s is allowed by one side and refused by the other", jsonText(v))
			}
		}
		return
	case b.hasEnum:
		c.fail(loc, "enum/const restricts one side and not the other")
		return
	}
	var aTypes []string
	if a.types == nil {
		aTypes = allTypes
	} else {
		aTypes = slices.Sorted(maps.Keys(a.types))
	}
	has := map[string]bool{}
	var lost []string
	for _, t := range aTypes {
		if !b.accepts(t) {
			lost = append(lost, t)
			continue
		}
		has[t] = true
	}
	if len(lost) > 0 {
		c.fail(loc+"/type", "type %s allowed by one side and refused by the other", strings.Join(lost, ", "))
	}
	if has["number"] || has["integer"] {
		if b.min != nil && !within(a.min, b.min, true) {
			c.fail(loc, "lower bound: %s does not imply %s", boundText(a.min, ">"), boundText(b.min, ">"))
		}
		if b.max != nil && !within(a.max, b.max, false) {
			c.fail(loc, "upper bound: %s does not imply %s", boundText(a.max, "<"), boundText(b.max, "<"))
		}
	}
	if has["string"] {
		if b.minLen > a.minLen {
			c.fail(loc+"/minLength", "minLength %d does not imply minLength %d", a.minLen, b.minLen)
		}
		if b.maxLen != nil && (a.maxLen == nil || *a.maxLen > *b.maxLen) {
			c.fail(loc+"/maxLength", "maxLength %s does not imply maxLength %d", intText(a.maxLen), *b.maxLen)
		}
		if b.pattern != nil && (a.pattern == nil || *a.pattern != *b.pattern) {
			c.fail(loc+"/pattern", "pattern %q is not implied (patterns are compared as equal text only)", *b.pattern)
		}
	}
	if has["array"] {
		c.sub(a.items, b.items, loc+"/items")
		if b.minItems > a.minItems {
			c.fail(loc+"/minItems", "minItems %d does not imply minItems %d", a.minItems, b.minItems)
		}
		if b.maxItems != nil && (a.maxItems == nil || *a.maxItems > *b.maxItems) {
			c.fail(loc+"/maxItems", "maxItems %s does not imply maxItems %d", intText(a.maxItems), *b.maxItems)
		}
	}
	if has["object"] {
		for _, r := range b.required {
			if !slices.Contains(a.required, r) {
				c.fail(loc+"/required", "property %q is required by one side and optional on the other", r)
			}
		}
		keys := map[string]bool{}
		for k := range a.props {
			keys[k] = true
		}
		for k := range b.props {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			pa, ok := a.props[k]
			if !ok {
				pa = a.addl
			}
			pb, ok := b.props[k]
			if !ok {
				pb = b.addl
			}
			c.sub(pa, pb, loc+"/properties/"+escape(k))
		}
		c.sub(a.addl, b.addl, loc+"/additionalProperties")
	}
}

// within reports whether bound a (of one side) implies bound b, both
// lower (lower=true) or both upper.
func within(a, b *bound, lower bool) bool {
	if a == nil {
		return false
	}
	if a.v == b.v {
		return a.excl || !b.excl
	}
	if lower {
		return a.v > b.v
	}
	return a.v < b.v
}

// tighter merges an inclusive and an exclusive bound into the tighter.
func tighter(incl, excl *float64, lower bool) *bound {
	var bs []*bound
	if incl != nil {
		bs = append(bs, &bound{v: *incl})
	}
	if excl != nil {
		bs = append(bs, &bound{v: *excl, excl: true})
	}
	if len(bs) == 0 {
		return nil
	}
	best := bs[0]
	for _, x := range bs[1:] {
		if within(x, best, lower) {
			best = x
		}
	}
	return best
}

func num(v any) *float64 {
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return nil
		}
		return &f
	case float64:
		return &v
	}
	return nil
}

func intp(f *float64) *int {
	if f == nil {
		return nil
	}
	i := int(*f)
	return &i
}

func orTrue(v any) any {
	if v == nil {
		return true
	}
	return v
}

func isTrue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return v
	case map[string]any:
		return parseNode(v).trivial()
	}
	return false
}

func boundText(b *bound, op string) string {
	if b == nil {
		return "no bound"
	}
	if !b.excl {
		op += "="
	}
	return op + " " + strconv.FormatFloat(b.v, 'g', -1, 64)
}

func intText(i *int) string {
	if i == nil {
		return "none"
	}
	return strconv.Itoa(*i)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// escape escapes a JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
