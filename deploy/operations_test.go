package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var operationsDoc = filepath.Join("..", "docs", "OPERATIONS.md")

// hubSource returns the hub's Go source (examples/hub), tests left out.
func hubSource(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "examples", "hub", "*.go"))
	require.NoError(t, err)
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src.Write(b)
	}
	require.NotZero(t, src.Len(), "no source of the hub found in examples/hub")
	return src.String()
}

// docs/OPERATIONS.md says what to do for every alert of alerts.yml (a
// section named for it, and none for an alert that is not there), and
// names every flag and environment variable of the hub.
func TestOperationsDoc(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(operationsDoc)
	require.NoError(t, err)
	doc := string(b)

	alerts := map[string]bool{}
	for _, r := range alertRules(t) {
		alerts[r.Alert] = true
		assert.Contains(t, doc, "\n### "+r.Alert+"\n", "%s has no section for alert %s", operationsDoc, r.Alert)
	}
	for _, m := range regexp.MustCompile(`\n### (Promlib\w+)\n`).FindAllStringSubmatch(doc, -1) {
		assert.True(t, alerts[m[1]], "%s has a section for alert %s, which alerts.yml does not have", operationsDoc, m[1])
	}

	src := hubSource(t)
	flags := regexp.MustCompile(`\bfs\.\w+Var\([^,]+,\s*"([a-z][a-z-]*)"`).FindAllStringSubmatch(src, -1)
	require.NotEmpty(t, flags, "no flag found in the hub's source")
	for _, m := range flags {
		assert.Contains(t, doc, "`-"+m[1]+"`", "%s does not name the hub's flag -%s", operationsDoc, m[1])
	}
	envs := regexp.MustCompile(`\bgetenv\("([A-Z_]+)"\)`).FindAllStringSubmatch(src, -1)
	require.NotEmpty(t, envs, "no environment variable found in the hub's source")
	for _, m := range envs {
		assert.Contains(t, doc, "`"+m[1]+"`", "%s does not name the hub's environment variable %s", operationsDoc, m[1])
	}
}
