package metrics_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/metrics"
)

// scrape serves GET /metrics from reg through metrics.Handler and
// returns the text exposition and its parse.
func scrape(t *testing.T, reg *prometheus.Registry) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.Header.Set("Accept", "text/plain;version=0.0.4")
	w := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.True(t, strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain"), w.Header().Get("Content-Type"))
	text := w.Body.String()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err)
	return text, fams
}

// value returns the value of the series of name with the given labels
// (name=value pairs; others may be present), and whether it exists. For a
// histogram it is the sample count.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := make(map[string]string)
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// labelValues returns the sorted values of label across the series of
// name.
func labelValues(fams map[string]*dto.MetricFamily, name, label string) []string {
	var out []string
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out = append(out, l.GetValue())
			}
		}
	}
	sort.Strings(out)
	return out
}

// lint checks the exposition with promtool check metrics when promtool is
// on PATH (Debian package prometheus), and always with client_golang's
// linter, which runs the same checks on the registry.
func lint(t *testing.T, reg *prometheus.Registry, text string) {
	t.Helper()
	if path, err := exec.LookPath("promtool"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Run(), "promtool check metrics:\n%s", out.String())
		t.Logf("promtool check metrics: no problems (%d bytes of exposition)", len(text))
	} else {
		t.Logf("promtool not on PATH; linting with client_golang's testutil only")
	}
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems, "lint problems")
}

type famMap = map[string]*dto.MetricFamily

// scrapeUntil scrapes reg until cond holds of the parse, and returns it.
func scrapeUntil(t *testing.T, reg *prometheus.Registry, cond func(famMap) bool) famMap {
	t.Helper()
	var fams famMap
	require.Eventually(t, func() bool {
		_, fams = scrape(t, reg)
		return cond(fams)
	}, 20*time.Second, 10*time.Millisecond)
	return fams
}
