package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// The hub of examples/hub has no schema registry: schema get and register
// answer the hub's not_supported on one line.
func TestSchemaHubWithoutRegistry(t *testing.T) {
	t.Parallel()
	promctl(t, "", "schema", "get").fails(t, 1, "schema: not_supported:", "(HTTP 501)")
	promctl(t, `{"type":"object"}`, "schema", "register", "t.schema").fails(t, 1, "schema: not_supported:", "(HTTP 501)")
}

// schema get and register over the ops endpoints of a host that has a
// registry: ops.Handler with a registry of versions in memory, which
// refuses a schema that drops a property under the rule "backward".
func TestSchema(t *testing.T) {
	t.Parallel()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bus.Close(context.Background()) })
	h, err := ops.NewHandler(ops.Config{Bus: bus, Schemas: &memSchemas{}})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	v1 := filepath.Join(dir, "v1.json")
	require.NoError(t, os.WriteFile(v1, []byte(`{"type":"object","required":["id"]}`+"\n"), 0o600))
	r := promctlAt(t, srv.URL, "", "schema", "register", "orders", v1, "-rule", "backward").ok(t)
	assert.Equal(t, "registered version 1 of the schema of orders (rule backward)\n", r.stdout)
	r = promctlAt(t, srv.URL, `{"type":"object","required":["id","total"]}`, "schema", "register", "orders", "-o", "json").ok(t)
	var v ops.SchemaVersion
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	assert.Equal(t, 2, v.Version)
	assert.Equal(t, "backward", v.Rule)
	promctlAt(t, srv.URL, `{"type":"object"}`, "schema", "register", "orders", "-").fails(t, 1, "schema: bad_request:", "drops required", "(HTTP 400)")

	r = promctlAt(t, srv.URL, "", "schema", "get").ok(t)
	assert.Regexp(t, `^TOPIC +CURRENT +RULE +VERSIONS\norders +2 +backward +2\n$`, r.stdout)
	r = promctlAt(t, srv.URL, "", "schema", "get", "orders").ok(t)
	assert.JSONEq(t, `{"type":"object","required":["id","total"]}`, r.stdout)
	r = promctlAt(t, srv.URL, "", "schema", "get", "orders", "-version", "1").ok(t)
	assert.JSONEq(t, `{"type":"object","required":["id"]}`, r.stdout)
	r = promctlAt(t, srv.URL, "", "schema", "get", "orders", "-o", "json").ok(t)
	var all struct{ Schemas []topicSchemas }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &all))
	require.Len(t, all.Schemas, 1)
	assert.Len(t, all.Schemas[0].Versions, 2)

	promctlAt(t, srv.URL, "", "schema", "get", "orders", "-version", "3").fails(t, 1, "no schema version 3")
	promctlAt(t, srv.URL, "", "schema", "get", "invoices").fails(t, 1, `topic "invoices" has no schema`)
	promctlAt(t, srv.URL, "{", "schema", "register", "orders").fails(t, 1, "stdin: not JSON")
	promctlAt(t, srv.URL, "", "schema", "register", "orders", filepath.Join(dir, "none.json")).fails(t, 1, "none.json")
}

// memSchemas is a schema registry in memory for TestSchema: versions per
// topic, and the one rule it checks, that "backward" keeps every required
// property of the version before.
type memSchemas struct {
	mu sync.Mutex
	by map[string][]ops.SchemaVersion
}

func (m *memSchemas) SchemaTopics(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for t := range m.by {
		out = append(out, t)
	}
	return out, nil
}

func (m *memSchemas) SchemaVersions(_ context.Context, topic string) ([]ops.SchemaVersion, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ops.SchemaVersion(nil), m.by[topic]...), nil
}

func (m *memSchemas) RegisterSchema(_ context.Context, topic string, doc json.RawMessage, rule string) (ops.SchemaVersion, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[string][]ops.SchemaVersion{}
	}
	vs := m.by[topic]
	if rule == "" {
		rule = "none"
		if len(vs) > 0 {
			rule = vs[len(vs)-1].Rule
		}
	}
	if len(vs) > 0 && rule == "backward" {
		var prev, next struct{ Required []string }
		_ = json.Unmarshal(vs[len(vs)-1].Schema, &prev)
		_ = json.Unmarshal(doc, &next)
		for _, p := range prev.Required {
			found := false
			for _, q := range next.Required {
				found = found || p == q
			}
			if !found {
				return ops.SchemaVersion{}, fmt.Errorf("%w: schema: drops required property %q (rule backward)", ops.ErrInvalid, p)
			}
		}
	}
	v := ops.SchemaVersion{Topic: topic, Version: len(vs) + 1, Schema: doc, Rule: rule, Created: time.Now()}
	m.by[topic] = append(vs, v)
	return v, nil
}
