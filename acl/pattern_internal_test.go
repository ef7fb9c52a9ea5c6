package acl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refMatch is the straightforward definition of a match: recursive
// backtracking over segments. It is exponential on patterns with many "**"
// and serves only as the reference the automaton is compared with.
func refMatch(pat, topic []string) bool {
	if len(pat) == 0 {
		return len(topic) == 0
	}
	switch pat[0] {
	case "**":
		for k := 0; k <= len(topic); k++ {
			if refMatch(pat[1:], topic[k:]) {
				return true
			}
		}
		return false
	case "*":
		return len(topic) > 0 && refMatch(pat[1:], topic[1:])
	default:
		return len(topic) > 0 && topic[0] == pat[0] && refMatch(pat[1:], topic[1:])
	}
}

func FuzzPatternMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"a.b", "a.b"}, {"*.b", "a.b"}, {"a.*", "a"}, {"**", "a.b.c"}, {"a.**", "a"},
		{"**.a", "a.a.a"}, {"a.**.z", "a.b.z"}, {"**.x.**", "x"}, {"*.**.*", "a"},
		{"**.a.**.a.**.b", "a.a.a.a.a.a.a.a"}, {"a.**.**.b", "a.b"}, {"a..b", "a..b"},
		{"a.b*", "a.b"}, {"", ""}, {"*", ""}, {"**", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, topic string) {
		p, err := CompilePattern(pattern)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			return
		}
		ps, ts := strings.Split(pattern, "."), strings.Split(topic, ".")
		if len(ps) > 16 || len(ts) > 32 {
			return // keep the reference (exponential) cheap
		}
		want := refMatch(ps, ts)
		require.Equal(t, want, p.Match(topic), "pattern %q topic %q", pattern, topic)
		got, steps := p.match(topic)
		require.Equal(t, want, got, "pattern %q topic %q (automaton)", pattern, topic)
		require.LessOrEqual(t, steps, stepBound(p, topic))
	})
}

// stepBound is the work the automaton may do: every live state once per
// topic segment, plus the "**" closure once per segment and once at start.
func stepBound(p *Pattern, topic string) int {
	n := strings.Count(topic, ".") + 1
	return (len(p.segs) + len(p.many)) * (n + 1)
}

// Patterns that make a backtracking matcher explode stay within the
// (pattern segments) x (topic segments) bound. Measured by counting the
// automaton's steps, not by timing.
func TestPatternMatchBounded(t *testing.T) {
	t.Parallel()
	long := strings.TrimSuffix(strings.Repeat("a.", 127), ".") // 127 segments, 253 chars
	tests := []struct {
		name    string
		pattern string
		topic   string
		want    bool
	}{
		{name: "many many many x", pattern: "**.**.**.x", topic: long},
		{name: "many a repeated", pattern: strings.Repeat("**.a.", 20) + "x", topic: long},
		{name: "many one repeated", pattern: strings.Repeat("**.*.", 20) + "x", topic: long},
		{name: "many a repeated matches", pattern: strings.Repeat("**.a.", 20) + "**", topic: long, want: true},
		{name: "one everywhere", pattern: strings.TrimSuffix(strings.Repeat("*.", 127), "."), topic: long, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := CompilePattern(tt.pattern)
			require.NoError(t, err)
			got, steps := p.match(tt.topic)
			assert.Equal(t, tt.want, got)
			bound := stepBound(p, tt.topic)
			assert.LessOrEqual(t, steps, bound)
			t.Logf("%d pattern segments, 127 topic segments: %d steps (bound %d)", len(p.segs), steps, bound)
		})
	}
}

func TestPatternMergesMany(t *testing.T) {
	t.Parallel()
	p, err := CompilePattern("**.**.**.x")
	require.NoError(t, err)
	assert.Len(t, p.segs, 2)
	assert.Equal(t, "**.**.**.x", p.String())
}

func BenchmarkPatternMatch(b *testing.B) {
	long := strings.TrimSuffix(strings.Repeat("a.", 127), ".")
	for _, bc := range []struct{ name, pattern, topic string }{
		{"literal", "process.state.x", "process.state.x"},
		{"one", "process.*.x", "process.state.x"},
		{"many end", "process.**", "process.state.x.y"},
		{"many many many x long", "**.**.**.x", long},
		{"many a x20 long", strings.Repeat("**.a.", 20) + "x", long},
	} {
		p, err := CompilePattern(bc.pattern)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Match(bc.topic)
			}
		})
	}
}
