package acl_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
)

func TestPatternMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
		yes     []string
		no      []string
	}{
		{name: "literal", pattern: "a.b.c", yes: []string{"a.b.c"}, no: []string{"a.b", "a.b.c.d", "a.b.cc", "x.b.c"}},
		{name: "one at start", pattern: "*.b.c", yes: []string{"a.b.c", "zz.b.c"}, no: []string{"b.c", "a.a.b.c", "a.b.c.d"}},
		{name: "one in middle", pattern: "a.*.c", yes: []string{"a.b.c", "a.x-y.c"}, no: []string{"a.c", "a.b.b.c", "a.b.d"}},
		{name: "one at end", pattern: "a.b.*", yes: []string{"a.b.c", "a.b.x:1"}, no: []string{"a.b", "a.b.c.d", "a.c.c"}},
		{name: "one alone", pattern: "*", yes: []string{"a", "b_c"}, no: []string{"a.b"}},
		{name: "several one", pattern: "*.*", yes: []string{"a.b"}, no: []string{"a", "a.b.c"}},
		{name: "many at start", pattern: "**.dlq", yes: []string{"dlq", "a.dlq", "a.b.c.dlq", "dlq.dlq"}, no: []string{"a.dlq.x", "adlq", "a.b"}},
		{name: "many in middle", pattern: "a.**.z", yes: []string{"a.z", "a.b.z", "a.b.c.d.z", "a.z.z"}, no: []string{"a", "z", "a.b", "b.a.z", "a.z.b"}},
		{name: "many at end", pattern: "process.**", yes: []string{"process", "process.a", "process.a.b.c"}, no: []string{"proc", "processes", "x.process"}},
		{name: "many alone", pattern: "**", yes: []string{"a", "a.b.c"}},
		{name: "many twice", pattern: "**.x.**", yes: []string{"x", "a.x", "x.b", "a.b.x.c.d"}, no: []string{"a.b", "xa.b"}},
		{name: "many merged", pattern: "a.**.**.b", yes: []string{"a.b", "a.c.b", "a.c.d.b"}, no: []string{"a", "b"}},
		{name: "one and many", pattern: "*.state.**", yes: []string{"svc.state", "svc.state.x.y"}, no: []string{"state", "a.b.state"}},
		{name: "many then one", pattern: "**.*", yes: []string{"a", "a.b", "a.b.c"}},
		{name: "one many one", pattern: "*.**.*", yes: []string{"a.b", "a.b.c", "a.b.c.d"}, no: []string{"a"}},
		{name: "many separated", pattern: "**.a.**.b.**", yes: []string{"a.b", "x.a.y.b.z", "a.a.b.b"}, no: []string{"b.a", "a", "b"}},
		{name: "colon in segment", pattern: "svc:1.*", yes: []string{"svc:1.x"}, no: []string{"svc.1.x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := acl.CompilePattern(tt.pattern)
			require.NoError(t, err)
			assert.Equal(t, tt.pattern, p.String())
			for _, topic := range tt.yes {
				assert.True(t, p.Match(topic), "%q should match %q", tt.pattern, topic)
			}
			for _, topic := range tt.no {
				assert.False(t, p.Match(topic), "%q should not match %q", tt.pattern, topic)
			}
		})
	}
}

func TestCompilePatternErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
		wantMsg string
	}{
		{name: "empty", pattern: "", wantMsg: "must not be empty"},
		{name: "too long", pattern: strings.Repeat("a", 256), wantMsg: "more than 255"},
		{name: "leading dot", pattern: ".a", wantMsg: "empty segment"},
		{name: "trailing dot", pattern: "a.", wantMsg: "empty segment"},
		{name: "double dot", pattern: "a..b", wantMsg: "empty segment"},
		{name: "partial star", pattern: "a.b*", wantMsg: "whole segments"},
		{name: "triple star", pattern: "a.***", wantMsg: "whole segments"},
		{name: "star inside", pattern: "a*b", wantMsg: "whole segments"},
		{name: "space", pattern: "a b", wantMsg: "offset 1"},
		{name: "slash", pattern: "a/b", wantMsg: "offset 1"},
		{name: "unicode", pattern: "é", wantMsg: "offset 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := acl.CompilePattern(tt.pattern)
			require.Error(t, err)
			assert.Nil(t, p)
			assert.ErrorIs(t, err, acl.ErrInvalid)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestPatternLongest(t *testing.T) {
	t.Parallel()
	// 128 one-character segments: the longest pattern there can be.
	segs := make([]string, acl.MaxPatternSegments)
	for i := range segs {
		segs[i] = "*"
	}
	p, err := acl.CompilePattern(strings.Join(segs, "."))
	require.NoError(t, err)
	for i := range segs {
		segs[i] = "a"
	}
	assert.True(t, p.Match(strings.Join(segs, ".")))
	assert.False(t, p.Match(strings.Join(segs[1:], ".")))
}
