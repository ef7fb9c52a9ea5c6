package archtest

import "strings"

// Patterns in rules are import paths. A pattern whose first element has
// no dot is relative to the module ("metrics", "ws/wsclient"); "..."
// alone is every package of the module; "x/..." is x and every package
// below it; "*" matches within one path element ("*/mongo*").

// Rule forbids some imports to some packages.
type Rule struct {
	// Name says the rule in words; failures quote it.
	Name string
	// Packages are the packages the rule applies to, and Except those it
	// does not apply to among them.
	Packages []string
	Except   []string
	// Forbid are the imports, direct or indirect, the packages must not
	// have, and Allow the exceptions among them.
	Forbid []string
	Allow  []string
}

// Driver is a database and the import paths of its Go drivers.
type Driver struct {
	Database string
	Imports  []string
}

// Drivers are the database drivers the driver rule keeps in their
// packages.
var Drivers = []Driver{
	{"mongo", []string{"go.mongodb.org/mongo-driver/..."}},
	{"pg", []string{"github.com/jackc/pgx/...", "github.com/lib/pq/..."}},
	{"sqlite", []string{"modernc.org/sqlite/...", "github.com/mattn/go-sqlite3/..."}},
}

// Rules are promlib's import rules: the drivers', a few between packages,
// and the order of [Layers].
var Rules = append(append(driverRules(Drivers), []Rule{
	{
		Name:     "the core event imports no other promlib package but the leaves clock, internal/backoff, internal/jsonenc and internal/offstack",
		Packages: []string{"event"},
		Forbid:   []string{"..."},
		Allow:    []string{"clock", "internal/backoff", "internal/jsonenc", "internal/offstack"},
	},
	{
		Name:     "the leaves clock, internal/backoff, internal/jsonenc, internal/offstack and txn import no promlib package",
		Packages: []string{"clock", "internal/backoff", "internal/jsonenc", "internal/offstack", "txn"},
		Forbid:   []string{"..."},
	},
	{
		Name:     "no library package imports examples",
		Packages: []string{"..."},
		Except:   []string{"examples/..."},
		Forbid:   []string{"examples/..."},
	},
	{
		Name:     "the core event, the gateway ws and ops import no schema code: validation enters a Bus through a publish interceptor of the schema module",
		Packages: []string{"event/...", "ws/...", "ops/..."},
		Forbid:   []string{"schema/...", "github.com/santhosh-tekuri/jsonschema/..."},
	},
	{
		Name:     "metrics must not import ops",
		Packages: []string{"metrics/..."},
		Forbid:   []string{"ops/..."},
	},
	{
		Name:     "the Go client ws/wsclient must not import the gateway ws",
		Packages: []string{"ws/wsclient/..."},
		Forbid:   []string{"ws"},
	},
	{
		Name:     "the frame codec ws/internal/wsframe imports neither the gateway nor the client",
		Packages: []string{"ws/internal/wsframe/..."},
		Forbid:   []string{"ws", "ws/wsclient/..."},
	},
}...), LayerRules(Layers)...)

// Layer is one rank of the module's packages (patterns as in [Rule]).
type Layer struct {
	Name     string
	Packages []string
}

// Layers are promlib's layers, lowest first. A package may import packages
// of its own layer and of the layers below, never one of a higher layer;
// every package of the module is in exactly one layer ([Unplaced] names
// those that are not). [LayerRules] turns the order into rules.
//
// The policies sit below the stores and the features, which use none of
// them: so acl, auth and ratelimit can never import an outbox, a store or
// the gateway.
var Layers = []Layer{
	{"helpers and test servers", []string{"clock", "internal/backoff", "internal/jsonenc", "internal/offstack", "internal/httpx", "internal/clientaddr",
		"internal/archtest", "internal/readmetest", "internal/testmongo", "internal/testpg", "internal/proctest", "internal/stacktest"}},
	{"core", []string{"event"}},
	{"policies", []string{"auth/...", "acl/...", "ratelimit/..."}},
	{"event stores", []string{"event/internal/...", "event/mongostore/...", "event/pgstore/...", "event/sqlitestore/...", "event/storetest/...",
		"internal/sqlstore", "internal/watchhub"}},
	{"features", []string{"txn/...", "outbox/...", "dedupe/...", "projector/...", "compaction/...",
		"schema", "schema/mongoschema", "schema/sqlschema", "schema/schematest", "internal/sqlconn", "internal/pgsql"}},
	{"edges", []string{"ws/...", "replay/...", "ops/...", "metrics/...", "schema/schemaops"}},
	{"entry points", []string{"sqlitedb", "pgdb", "mongodb", "storeurl"}},
	{"programs", []string{"cmd/...", "examples/...", "tools/...", "deploy", "contrib/..."}},
}

// LayerRules returns, for each layer but the highest, the rule that its
// packages import no package of a higher layer.
func LayerRules(layers []Layer) []Rule {
	var rules []Rule
	for i, l := range layers[:max(len(layers)-1, 0)] {
		var above, names []string
		for _, h := range layers[i+1:] {
			above = append(above, h.Packages...)
			names = append(names, h.Name)
		}
		rules = append(rules, Rule{
			Name:     "layer " + l.Name + " imports no package of a higher layer (" + strings.Join(names, ", ") + ")",
			Packages: l.Packages,
			Forbid:   above,
		})
	}
	return rules
}

// driverRules returns, for each database, the rule that its drivers are
// imported only by packages named for it (*/<db>*, the entry point
// <db>*, internal/test<db>), by storeurl (which opens every database),
// and by the programs in cmd/, examples/ and tools/.
func driverRules(drivers []Driver) []Rule {
	rules := make([]Rule, 0, len(drivers))
	for _, d := range drivers {
		rules = append(rules, Rule{
			Name:     "a " + d.Database + " driver is imported only by packages named for " + d.Database + " (*/" + d.Database + "*, " + d.Database + "*, internal/test" + d.Database + "), storeurl, and programs (cmd/, examples/, tools/)",
			Packages: []string{"..."},
			Except:   []string{"*/" + d.Database + "*", d.Database + "*", "internal/test" + d.Database, "storeurl", "cmd/...", "examples/...", "tools/..."},
			Forbid:   d.Imports,
		})
	}
	return rules
}
