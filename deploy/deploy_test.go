package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The files checked, relative to this package.
var (
	promDir       = "prometheus"
	alertsFile    = "alerts.yml"
	ruleTestFiles = []string{"alerts_test.yml", "alerts_test_day.yml"}
	dashboardFile = filepath.Join("grafana", "promlib.json")
	metricsDoc    = filepath.Join("..", "docs", "METRICS.md")
)

// notExported are the series the rules may name that the hub does not
// export: up is Prometheus's own, one per scrape target.
var notExported = map[string]bool{"up": true}

// promtool returns the path of promtool. Without it the test is skipped,
// saying so, unless CI=true, where it fails.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("promtool is needed (CI=true): install Debian's prometheus package: %v", err)
	}
	t.Skipf("SKIPPED: promtool is not on PATH (Debian's prometheus package has it): %v", err)
	return ""
}

// runPromtool runs promtool with args in dir and returns its output; a
// failure fails the test with it.
func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), "promtool %v:\n%s", args, out.String())
	return out.String()
}

// ruleFile is a Prometheus rules file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert,omitempty"`
	Record      string            `yaml:"record,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// ruleTests is a promtool unit test file, as far as these checks read it.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(false)
	require.NoError(t, dec.Decode(v), "%s", path)
}

func alertRules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	readYAML(t, filepath.Join(promDir, alertsFile), &f)
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	require.NotEmpty(t, out, "no rules in %s", alertsFile)
	return out
}

// checkNames fails the test for each metric of expr that the hub does not
// export; what names where it is.
func checkNames(t *testing.T, exported map[string]bool, what, expr string) {
	t.Helper()
	names, err := metricNames(expr)
	if !assert.NoError(t, err, "%s: %s", what, expr) {
		return
	}
	assert.NotEmpty(t, names, "%s names no metric: %s", what, expr)
	for _, n := range names {
		assert.True(t, exported[n] || notExported[n], "%s names %s, which the hub does not export: %s", what, n, expr)
	}
}

// The alert rules are valid and their unit tests pass.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	out := runPromtool(t, promDir, "check", "rules", alertsFile)
	t.Logf("promtool check rules %s:\n%s", alertsFile, out)
	out = runPromtool(t, promDir, append([]string{"test", "rules"}, ruleTestFiles...)...)
	t.Logf("promtool test rules:\n%s", out)
}

// Every alert is tested where it fires and where it does not, has a
// severity and a summary, and every series named by the rules and by the
// tests' input is one the hub exports.
func TestAlertNames(t *testing.T) {
	t.Parallel()
	exported := hubMetricNames(t)
	rules := alertRules(t)
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, name := range ruleTestFiles {
		var f ruleTests
		readYAML(t, filepath.Join(promDir, name), &f)
		assert.Equal(t, []string{alertsFile}, f.RuleFiles, name)
		for _, tc := range f.Tests {
			for _, s := range tc.InputSeries {
				checkNames(t, exported, name+" input series", s.Series)
			}
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, r := range rules {
		require.NotEmpty(t, r.Alert, "a rule of %s that is no alert: %s", alertsFile, r.Expr)
		assert.False(t, seen[r.Alert], "alert %s twice", r.Alert)
		seen[r.Alert] = true
		checkNames(t, exported, "alert "+r.Alert, r.Expr)
		assert.True(t, firing[r.Alert], "alert %s has no unit test where it fires", r.Alert)
		assert.True(t, quiet[r.Alert], "alert %s has no unit test where it does not fire", r.Alert)
		assert.Contains(t, []string{"critical", "warning", "info"}, r.Labels["severity"], "alert %s: severity", r.Alert)
		assert.NotEmpty(t, r.Annotations["summary"], "alert %s: summary", r.Alert)
	}
	for name := range firing {
		assert.True(t, seen[name], "a unit test of alert %s, which %s does not have", name, alertsFile)
	}
}

// The alert rules that docs/METRICS.md quotes are those of alerts.yml:
// same expression, same for.
func TestMetricsDocAlerts(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(metricsDoc)
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	rules := map[string]rule{}
	for _, r := range alertRules(t) {
		rules[r.Alert] = r
	}
	quoted := 0
	for _, b := range blocks {
		var f ruleFile
		require.NoError(t, yaml.Unmarshal(b[1], &f), "a yaml block of %s:\n%s", metricsDoc, b[1])
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				quoted++
				want, ok := rules[r.Alert]
				if assert.True(t, ok, "%s quotes alert %q, which %s does not have", metricsDoc, r.Alert, alertsFile) {
					assert.Equal(t, strings.TrimSpace(want.Expr), strings.TrimSpace(r.Expr), "alert %s: expr in %s", r.Alert, metricsDoc)
					assert.Equal(t, want.For, r.For, "alert %s: for in %s", r.Alert, metricsDoc)
				}
			}
		}
	}
	require.NotZero(t, quoted, "%s quotes no alert rule", metricsDoc)
}

// dashboard is a Grafana dashboard, as far as these checks read it.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // of a collapsed row
}

// grafanaVars are the values the check gives Grafana's own variables.
var grafanaVars = map[string]string{
	"__rate_interval": "5m", "__interval": "1m", "__range": "1h",
	"__interval_ms": "60000", "__range_s": "3600", "__range_ms": "3600000",
}

var varRE = regexp.MustCompile(`\$(\w+)|\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]`)

// expand replaces the dashboard's variables in q: Grafana's own by a
// duration, the dashboard's by a regex that matches anything (they are
// used with =~). An unknown variable fails the test.
func expand(t *testing.T, q string, vars map[string]bool) string {
	t.Helper()
	return varRE.ReplaceAllStringFunc(q, func(m string) string {
		sm := varRE.FindStringSubmatch(m)
		name := sm[1] + sm[2] + sm[3]
		if v, ok := grafanaVars[name]; ok {
			return v
		}
		assert.True(t, vars[name], "variable $%s is not a variable of the dashboard: %s", name, q)
		return ".+"
	})
}

var labelValuesRE = regexp.MustCompile(`^\s*(?:label_values|query_result)\((.*?)(?:,\s*\w+)?\)\s*$`)

// dashboardQuery is a query of the dashboard, its variables expanded;
// what says where it is.
type dashboardQuery struct{ what, expr string }

// dashboardQueries returns the queries of the dashboard's panels and of
// its template variables, checking the panels on the way.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	require.NotEmpty(t, d.UID)
	require.NotEmpty(t, d.Title)

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	require.True(t, vars["datasource"], "the dashboard has no datasource variable")

	var queries []dashboardQuery
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		sm := labelValuesRE.FindStringSubmatch(q)
		require.NotNil(t, sm, "variable %s: query %q is not label_values(...) or query_result(...)", v.Name, q)
		queries = append(queries, dashboardQuery{"variable " + v.Name, expand(t, sm[1], vars)})
	}
	var walk func([]panel)
	ids := map[int]bool{}
	walk = func(ps []panel) {
		for _, p := range ps {
			assert.False(t, ids[p.ID], "panel id %d twice", p.ID)
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if assert.NotNil(t, p.Datasource, "panel %q has no datasource", p.Title) {
				assert.Equal(t, "${datasource}", p.Datasource.UID, "panel %q: datasource", p.Title)
			}
			assert.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
			for _, tg := range p.Targets {
				queries = append(queries, dashboardQuery{fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), expand(t, tg.Expr, vars)})
			}
		}
	}
	walk(d.Panels)
	require.NotEmpty(t, queries)
	return queries
}

// Every query of the dashboard, its template variables' too, parses.
func TestDashboardParses(t *testing.T) {
	t.Parallel()
	queries := dashboardQueries(t)

	// promtool parses each query as the expression of a recording rule.
	var rf ruleFile
	rf.Groups = make([]struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	}, 1)
	rf.Groups[0].Name = "dashboard"
	for i, q := range queries {
		rf.Groups[0].Rules = append(rf.Groups[0].Rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: q.expr})
	}
	y, err := yaml.Marshal(rf)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard.yml"), y, 0o600))
	out := runPromtool(t, dir, "check", "rules", "dashboard.yml")
	t.Logf("promtool check rules (the %d queries of %s):\n%s", len(queries), dashboardFile, out)
}

// Every query of the dashboard, its template variables' too, names only
// metrics the hub exports.
func TestDashboardNames(t *testing.T) {
	t.Parallel()
	queries := dashboardQueries(t)
	exported := hubMetricNames(t)
	used := map[string]bool{}
	for _, q := range queries {
		checkNames(t, exported, q.what, q.expr)
		names, _ := metricNames(q.expr)
		for _, n := range names {
			used[n] = true
		}
	}
	t.Logf("the dashboard's queries name %d metrics", len(used))
}

// The series the dashboard shows: each one the brief of the dashboard
// asks for is on it.
func TestDashboardCovers(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	for _, n := range []string{
		"promlib_events_published_total", "promlib_events_delivered_total", "promlib_events_acked_total",
		"promlib_consumer_lag", "promlib_consumer_lag_seconds", "promlib_events_in_flight",
		"promlib_events_dead_lettered_total", "promlib_handler_duration_seconds_bucket",
		"promlib_ws_connections", "promlib_outbox_rows",
	} {
		assert.True(t, slices.Contains(regexp.MustCompile(`[a-z_:]+`).FindAllString(string(b), -1), n), "the dashboard does not show %s", n)
	}
}
