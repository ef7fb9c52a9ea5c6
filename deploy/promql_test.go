package deploy_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupingRE matches the label lists of aggregations and vector matching,
// which name labels, not metrics.
var groupingRE = regexp.MustCompile(`(?i)\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)

// promqlKeywords are the words of PromQL that are neither metrics nor
// functions (case-insensitive).
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "offset": true, "bool": true, "inf": true, "nan": true,
}

// metricNames returns the metric names an expression selects, sorted and
// unique. The expression must be valid PromQL (promtool checks that); a
// selector by __name__ is refused, so that every metric is named.
func metricNames(expr string) ([]string, error) {
	// Strings and comments out; then what is inside braces (label
	// matchers) and brackets (ranges, subqueries); then label lists.
	var b strings.Builder
	depth := map[byte]int{}
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' {
					j++
				}
			}
			if j >= len(expr) {
				return nil, errors.New("unterminated string")
			}
			i = j
			b.WriteByte(' ')
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
			b.WriteByte(' ')
		case c == '{' || c == '[':
			depth[c]++
			b.WriteByte(' ')
		case c == '}':
			depth['{']--
			b.WriteByte(' ')
		case c == ']':
			depth['[']--
			b.WriteByte(' ')
		case depth['{'] > 0:
			if strings.HasPrefix(expr[i:], "__name__") {
				return nil, errors.New("a selector by __name__: name the metric")
			}
		case depth['['] > 0:
		default:
			b.WriteByte(c)
		}
	}
	s := groupingRE.ReplaceAllString(b.String(), " ")

	var names []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			// A number or a duration: 1, 0.5, 1e-3, 0x1f, 5m.
			for i++; i < len(s) && (isIdent(s[i]) || s[i] == '.' ||
				(s[i] == '+' || s[i] == '-') && (s[i-1] == 'e' || s[i-1] == 'E')); i++ {
			}
		case isIdentStart(c):
			j := i
			for i++; i < len(s) && isIdent(s[i]); i++ {
			}
			word := s[j:i]
			k := i
			for k < len(s) && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n' || s[k] == '\r') {
				k++
			}
			if k < len(s) && s[k] == '(' || promqlKeywords[strings.ToLower(word)] {
				continue // a function, an aggregation or a keyword
			}
			names = append(names, word)
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func TestMetricNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, expr string
		want       []string
		wantErr    string
	}{
		{name: "selector", expr: `promlib_consumer_lag{topic="a", group!~"x|y"}`, want: []string{"promlib_consumer_lag"}},
		{name: "aggregation", expr: `max by (topic, group) (promlib_consumer_lag) > 1000`, want: []string{"promlib_consumer_lag"}},
		{name: "modifier after", expr: `sum(rate(a_total[5m])) without (instance, job)`, want: []string{"a_total"}},
		{name: "vector matching", expr: `process_open_fds / ignoring (x) group_left (y) process_max_fds > 0.8
			and on (job, instance) promlib_ws_connections`, want: []string{"process_max_fds", "process_open_fds", "promlib_ws_connections"}},
		{name: "histogram", expr: `histogram_quantile(0.99, sum by (le) (rate(h_seconds_bucket{a="b"}[$__rate_interval])))`, want: []string{"h_seconds_bucket"}},
		{name: "keywords any case", expr: `a OR b unless c AND d == bool 1 offset 5m`, want: []string{"a", "b", "c", "d"}},
		{name: "numbers", expr: `x > 1e-3 + 0x1f + .5 + 2.5E+3 + Inf - NaN`, want: []string{"x"}},
		{name: "strings and regexes", expr: `label_replace(up{job=~"a.*"}, "dst", "$1", 'src', "(by)")`, want: []string{"up"}},
		{name: "subquery and at", expr: `max_over_time(rate(c_total[1m])[10m:1m] @ start())`, want: []string{"c_total"}},
		{name: "recording rule names", expr: `job:errors:rate5m / job:requests:rate5m`, want: []string{"job:errors:rate5m", "job:requests:rate5m"}},
		{name: "comment", expr: "a # b\n + c", want: []string{"a", "c"}},
		{name: "no metric", expr: `vector(1)`, want: nil},
		{name: "by __name__", expr: `{__name__="a"}`, wantErr: "__name__"},
		{name: "unterminated", expr: `a{b="c}`, wantErr: "unterminated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := metricNames(tt.expr)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
