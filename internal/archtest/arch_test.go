package archtest

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The module and the nested schema module (whose packages have their
// place in the layers) follow every rule of the table, and every package
// is in one layer.
func TestModuleFollowsTheRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	require.NoError(t, err)
	dir := filepath.Dir(strings.TrimSpace(string(gomod)))
	module, err := exec.CommandContext(ctx, "go", "list", "-m").Output()
	require.NoError(t, err)
	mod := strings.TrimSpace(string(module))

	var pkgs []Package
	seen := map[string]bool{}
	for _, d := range []string{dir, filepath.Join(dir, "schema")} {
		ps, err := List(ctx, d, "./...")
		require.NoError(t, err)
		for _, p := range ps {
			if !seen[p.ImportPath] {
				seen[p.ImportPath] = true
				pkgs = append(pkgs, p)
			}
		}
	}
	require.NotEmpty(t, pkgs)
	require.True(t, seen[mod+"/schema/schemaops"], "the schema module is listed")
	for _, v := range Check(mod, pkgs, Rules) {
		t.Error(v)
	}
	for _, u := range Unplaced(mod, pkgs, Layers) {
		t.Errorf("%s: add it to one layer of archtest.Layers (and to docs/ARCHITECTURE.md)", u)
	}
	for _, r := range Rules {
		n := 0
		for _, p := range pkgs {
			if matchAny(mod, r.Packages, p.ImportPath) && !matchAny(mod, r.Except, p.ImportPath) {
				n++
			}
		}
		if n == 0 {
			t.Logf("rule %q applies to no package yet", r.Name)
		}
	}
}

const fakeModule = "example.com/m"

// fakeGraph is a module that keeps the rules, before breakFn breaks one.
func fakeGraph() map[string][]string {
	m := func(p string) string { return fakeModule + "/" + p }
	return map[string][]string{
		m("clock"):                             {"time"},
		m("internal/backoff"):                  {"time"},
		m("txn"):                               {"context"},
		m("event"):                             {m("clock"), m("internal/backoff"), "github.com/google/uuid"},
		m("acl"):                               {m("event")},
		m("ratelimit"):                         {m("clock")},
		m("outbox"):                            {m("event"), m("clock")},
		m("outbox/mongooutbox"):                {m("outbox"), m("txn"), "go.mongodb.org/mongo-driver/v2/mongo"},
		m("event/mongostore"):                  {m("event"), "go.mongodb.org/mongo-driver/v2/mongo"},
		m("internal/testmongo"):                {"go.mongodb.org/mongo-driver/v2/mongo"},
		m("ws/internal/wsframe"):               {m("event")},
		m("ws"):                                {m("ws/internal/wsframe"), m("event")},
		m("ws/wsclient"):                       {m("ws/internal/wsframe")},
		m("ops"):                               {m("event")},
		m("metrics"):                           {m("event"), m("outbox")},
		m("examples/hub"):                      {m("metrics"), m("event/mongostore"), "go.mongodb.org/mongo-driver/v2/mongo"},
		"go.mongodb.org/mongo-driver/v2/mongo": {"go.mongodb.org/mongo-driver/v2/bson"},
		"go.mongodb.org/mongo-driver/v2/bson":  {"time"},
		"github.com/google/uuid":               {"crypto/rand"},
	}
}

func packages(g map[string][]string) []Package {
	var out []Package
	for p, imps := range g {
		out = append(out, Package{ImportPath: p, Imports: imps})
	}
	return out
}

// The checker finds each kind of broken rule in a fake module, and names
// the package, the forbidden import and the chain to it.
func TestCheckFindsBrokenRules(t *testing.T) {
	t.Parallel()
	require.Empty(t, Check(fakeModule, packages(fakeGraph()), Rules), "the fake module keeps the rules")
	m := func(p string) string { return fakeModule + "/" + p }
	tests := []struct {
		name      string
		pkg       string
		add       string
		also      [][2]string // more imports: package, import
		wantRule  string
		wantChain string
	}{
		{"driver in a feature package", "outbox", "go.mongodb.org/mongo-driver/v2/mongo", nil, "mongo driver",
			"outbox -> go.mongodb.org/mongo-driver/v2/mongo"},
		{"driver through a mongo package", "metrics", m("outbox/mongooutbox"), nil, "mongo driver",
			"metrics -> outbox/mongooutbox -> go.mongodb.org/mongo-driver/v2/mongo"},
		{"pgx in a feature package", "outbox", "github.com/jackc/pgx/v5", nil, "pg driver",
			"outbox -> github.com/jackc/pgx/v5"},
		{"event imports a promlib package", "event", m("txn"), nil, "core event",
			"event -> txn"},
		{"a leaf imports a promlib package", "clock", m("internal/backoff"), nil, "leaves",
			"clock -> internal/backoff"},
		{"a library imports examples", "ops", m("examples/hub"), nil, "no library package imports examples",
			"ops -> examples/hub"},
		{"metrics imports ops", "metrics", m("ops"), nil, "metrics must not import ops",
			"metrics -> ops"},
		{"the client imports the gateway", "ws/wsclient", m("ws"), nil, "ws/wsclient must not import",
			"ws/wsclient -> ws"},
		{"the codec imports the client", "ws/internal/wsframe", m("ws/wsclient"), nil, "frame codec",
			"ws/internal/wsframe -> ws/wsclient"},
		{"a policy imports a feature", "acl", m("outbox"), nil, "layer policies imports no package of a higher layer",
			"acl -> outbox"},
		{"a policy reaches a feature through another policy", "acl", m("ratelimit"), [][2]string{{"ratelimit", m("outbox")}},
			"layer policies imports no package of a higher layer", "acl -> ratelimit -> outbox"},
		{"a feature imports an edge", "outbox", m("ws"), nil, "layer features imports no package of a higher layer",
			"outbox -> ws"},
		{"a store imports an entry point", "event/mongostore", m("mongodb"), nil, "layer event stores imports no package",
			"event/mongostore -> mongodb"},
		{"a helper imports the core", "internal/backoff", m("event"), nil, "layer helpers and test servers imports no package",
			"internal/backoff -> event"},
		{"an edge imports a program", "ops", m("cmd/promctl"), nil, "layer edges imports no package",
			"ops -> cmd/promctl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := fakeGraph()
			for _, e := range append([][2]string{{tt.pkg, tt.add}}, tt.also...) {
				g[m(e[0])] = append(g[m(e[0])], e[1])
				if _, ok := g[e[1]]; !ok {
					g[e[1]] = nil
				}
			}
			vs := Check(fakeModule, packages(g), Rules)
			require.NotEmpty(t, vs)
			var found bool
			for _, v := range vs {
				if v.Package == tt.pkg && strings.Contains(v.Rule, tt.wantRule) {
					found = true
					assert.Equal(t, tt.wantChain, strings.Join(v.Chain, " -> "))
					assert.Contains(t, v.String(), tt.pkg+" imports ")
				}
			}
			assert.True(t, found, "no violation of %q by %s in %v", tt.wantRule, tt.pkg, vs)
		})
	}
}

// Unplaced names a package that no layer holds, and one that two hold.
func TestUnplaced(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return fakeModule + "/" + p }
	g := fakeGraph()
	require.Empty(t, Unplaced(fakeModule, packages(g), Layers), "every package of the fake module has its layer")

	g[m("newpkg")] = []string{m("event")}
	assert.Equal(t, []string{"newpkg: in no layer"}, Unplaced(fakeModule, packages(g), Layers))

	layers := append(slices.Clone(Layers), Layer{"again", []string{"ws/..."}})
	assert.ElementsMatch(t, []string{
		"ws: in layers edges, again",
		"ws/internal/wsframe: in layers edges, again",
		"ws/wsclient: in layers edges, again",
	}, Unplaced(fakeModule, packages(fakeGraph()), layers))
}

func TestMatch(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return fakeModule + "/" + p }
	tests := []struct {
		pat, p string
		want   bool
	}{
		{"...", m("event"), true},
		{"...", "github.com/google/uuid", false},
		{"event", m("event"), true},
		{"event", m("event/mongostore"), false},
		{"event/...", m("event/mongostore"), true},
		{"*/mongo*", m("outbox/mongooutbox"), true},
		{"*/mongo*", m("txn/mongotxn"), true},
		{"*/mongo*", m("outbox"), false},
		{"*/mongo*", m("a/b/mongox"), false},
		{"go.mongodb.org/mongo-driver/...", "go.mongodb.org/mongo-driver/v2/bson", true},
		{"go.mongodb.org/mongo-driver/...", "go.mongodb.org/mongo-driverx", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, match(fakeModule, tt.pat, tt.p), "%s ~ %s", tt.pat, tt.p)
	}
}
