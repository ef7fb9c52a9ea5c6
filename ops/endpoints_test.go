package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// fakeSchemas is a schema registry in memory.
type fakeSchemas struct {
	mu sync.Mutex
	vs map[string][]ops.SchemaVersion
}

func (f *fakeSchemas) SchemaTopics(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ts []string
	for t := range f.vs {
		ts = append(ts, t)
	}
	return ts, nil
}

func (f *fakeSchemas) SchemaVersions(_ context.Context, topic string) ([]ops.SchemaVersion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.vs[topic], nil
}

func (f *fakeSchemas) RegisterSchema(_ context.Context, topic string, doc json.RawMessage, rule string) (ops.SchemaVersion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rule == "" {
		rule = "backward"
	}
	if rule != "backward" && rule != "none" {
		return ops.SchemaVersion{}, fmt.Errorf("%w: rule: %q is not a rule", ops.ErrInvalid, rule)
	}
	v := ops.SchemaVersion{Topic: topic, Version: len(f.vs[topic]) + 1, Schema: doc, Rule: rule, Created: time.Unix(0, 0).UTC()}
	f.vs[topic] = append(f.vs[topic], v)
	return v, nil
}

// endpointCase is a route's requests: one that succeeds for root, one
// with a bad parameter (named in the answer), and who is refused (403).
type endpointCase struct {
	route          string // "GET /topics", as ops.Routes names it
	ok, bad, param string
	forbidden      []string // principals answered 403 on ok
	write          string   // the action a write logs and counts
	check          func(t *testing.T, body string)
}

// coveredByAuthAndAudit are the routes TestEndpointsAuthAndAudit checks
// the same way (401, 400, 403, success, and a write's log and metric).
var coveredByAuthAndAudit = []string{
	"GET /groups", "GET /events", "GET /dlq", "GET /connections",
	"POST /dlq/purge", "POST /dlq/redrive", "POST /cursor", "POST /groups/delete",
	"POST /topics/partitions",
}

// Every route below the prefix answers 401 without a token, 400 naming a
// bad parameter, 403 to a principal without the scope, and 200 with what
// it serves; a write is logged with its principal and counted. The table
// and TestEndpointsAuthAndAudit together cover every route the Handler
// has, and the page ("GET /{$}", served to anyone).
func TestEveryEndpoint(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	ctx := context.Background()
	logs := &syncBuf{}
	reg := prometheus.NewRegistry()
	h := newHandler(t, ops.Config{
		Bus: bus, Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Schemas: &fakeSchemas{vs: map[string][]ops.SchemaVersion{}},
		Verifier: testVerifier(t, map[string][]string{
			"root":   {"inspect:**", "admin:**"},
			"reader": {"inspect:**"},
			"other":  {"inspect:else", "admin:else"},
			"nobody": {"publish:**", "subscribe:**"},
		}),
		ChartGroups: []string{"orders/billing"},
	})
	for _, k := range []string{"a", "b", "a"} {
		_, err := bus.Publish(ctx, "orders", []byte(`{"k":"`+k+`"}`), event.WithKey(k))
		require.NoError(t, err)
	}
	held := make(chan *event.Delivery, 3)
	sub, err := bus.Subscribe(ctx, "orders", "billing", func(_ context.Context, d *event.Delivery) error {
		held <- d
		return nil
	}, event.FromEarliest(), event.WithManualAck(), event.WithMaxInFlight(1))
	require.NoError(t, err)
	d := <-held
	t.Cleanup(func() { _ = d.Ack(ctx); _ = sub.Close() })
	require.NoError(t, h.Sample(ctx))

	decode := func(t *testing.T, body string, v any) {
		t.Helper()
		require.NoError(t, json.Unmarshal([]byte(body), v), body)
	}
	tests := []endpointCase{
		{route: "GET /topics", ok: "/ops/topics", bad: "/ops/topics?topic=a%20b", param: "topic",
			forbidden: []string{"nobody"}, check: func(t *testing.T, body string) {
				var r ops.TopicsResponse
				decode(t, body, &r)
				require.Len(t, r.Topics, 1)
				assert.Equal(t, "orders", r.Topics[0].Topic)
				assert.Equal(t, int64(3), r.Topics[0].Events)
			}},
		{route: "GET /topics", ok: "/ops/topics?topic=orders", bad: "/ops/topics?topic=orders&x=1", param: "x",
			forbidden: []string{"other", "nobody"}},
		{route: "GET /cursors", ok: "/ops/cursors?topic=orders", bad: "/ops/cursors", param: "topic",
			forbidden: []string{"other", "nobody"}, check: func(t *testing.T, body string) {
				var r ops.CursorsResponse
				decode(t, body, &r)
				assert.Equal(t, uint64(3), r.Head)
				require.Len(t, r.Cursors, 1)
				assert.Equal(t, "billing", r.Cursors[0].Group)
			}},
		{route: "GET /lag", ok: "/ops/lag?topic=orders&group=billing", bad: "/ops/lag?topic=orders&group=a..b", param: "group",
			forbidden: []string{"other", "nobody"}, check: func(t *testing.T, body string) {
				var r event.GroupStatus
				decode(t, body, &r)
				assert.Equal(t, uint64(3), r.Head)
				assert.Equal(t, uint64(3), r.Lag, "nothing acked yet")
				require.NotNil(t, r.Local)
				assert.Equal(t, 1, r.Local.InFlight)
			}},
		{route: "GET /inflight", ok: "/ops/inflight", bad: "/ops/inflight?group=billing", param: "topic",
			forbidden: []string{"nobody"}, check: func(t *testing.T, body string) {
				var r ops.InflightResponse
				decode(t, body, &r)
				require.Len(t, r.Groups, 1)
				assert.Equal(t, 1, r.InFlight)
			}},
		{route: "GET /inflight", ok: "/ops/inflight?topic=orders&group=billing", bad: "/ops/inflight?topic=orders&group=billing&limit=1", param: "limit",
			forbidden: []string{"other", "nobody"}, check: func(t *testing.T, body string) {
				var r ops.InflightResponse
				decode(t, body, &r)
				require.Len(t, r.Deliveries, 1)
				assert.Equal(t, d.ID, r.Deliveries[0].ID)
				assert.Equal(t, "in_flight", r.Deliveries[0].State)
			}},
		{route: "GET /latest", ok: "/ops/latest?topic=orders&key=a", bad: "/ops/latest?topic=orders&key=", param: "key",
			forbidden: []string{"other", "nobody"}, check: func(t *testing.T, body string) {
				var r ops.LatestResponse
				decode(t, body, &r)
				assert.Equal(t, uint64(3), r.Record.Seq)
			}},
		{route: "GET /settings", ok: "/ops/settings", bad: "/ops/settings?window=1", param: "window",
			forbidden: []string{"nobody"}, check: func(t *testing.T, body string) {
				var r ops.SettingsResponse
				decode(t, body, &r)
				assert.Equal(t, ops.DefaultChartWindow.Milliseconds(), r.ChartWindowMs)
				assert.Equal(t, ops.DefaultChartInterval.Milliseconds(), r.ChartIntervalMs)
				assert.Equal(t, []string{"orders/billing"}, r.ChartGroups)
				assert.False(t, r.ReadOnly)
			}},
		{route: "GET /charts", ok: "/ops/charts", bad: "/ops/charts?since=-1", param: "since",
			forbidden: []string{"nobody"}, check: func(t *testing.T, body string) {
				var r ops.ChartsResponse
				decode(t, body, &r)
				assert.Equal(t, 1, r.Samples)
				require.Len(t, r.Topics, 1)
				assert.Equal(t, "orders", r.Topics[0].Topic)
				require.Len(t, r.Groups, 1)
				assert.Equal(t, "billing", r.Groups[0].Group)
				require.Len(t, r.Groups[0].Lag, 1)
				assert.Equal(t, 3.0, r.Groups[0].Lag[0].V)
			}},
		{route: "GET /charts", ok: "/ops/charts?topic=orders", bad: "/ops/charts?topic=orders.*", param: "topic",
			forbidden: []string{"other", "nobody"}},
		{route: "GET /schemas", ok: "/ops/schemas?topic=orders", bad: "/ops/schemas?topic=a%20b", param: "topic",
			forbidden: []string{"other", "nobody"}},
		{route: "POST /schemas", ok: "/ops/schemas?topic=orders&schema=" + url.QueryEscape(`{"type":"object"}`), bad: "/ops/schemas?topic=orders&schema=%7B", param: "schema",
			forbidden: []string{"reader", "other", "nobody"}, write: "schema_register", check: func(t *testing.T, body string) {
				var v ops.SchemaVersion
				decode(t, body, &v)
				assert.Equal(t, 1, v.Version)
				var all map[string][]struct{ Current int }
				decode(t, callAs(t, h, "GET", "/ops/schemas", "reader", http.StatusOK), &all)
				require.Len(t, all["schemas"], 1)
				assert.Equal(t, 1, all["schemas"][0].Current)
			}},
		{route: "GET /connections", ok: "/ops/connections", bad: "/ops/connections?x=1", param: "x", forbidden: []string{"nobody"},
			check: func(t *testing.T, body string) { assert.Contains(t, body, "not_supported") }},
	}
	covered := map[string]bool{"GET /{$}": true}
	for _, r := range coveredByAuthAndAudit {
		covered[r] = true
	}
	for _, tc := range tests {
		t.Run(tc.route+" "+tc.ok, func(t *testing.T) {
			covered[tc.route] = true
			method, _, _ := strings.Cut(tc.route, " ")
			callAs(t, h, method, tc.ok, "", http.StatusUnauthorized)
			callAs(t, h, method, tc.ok, "wrong", http.StatusUnauthorized)
			body := callAs(t, h, method, tc.bad, "root", http.StatusBadRequest)
			assert.Contains(t, body, tc.param)
			for _, p := range tc.forbidden {
				body = callAs(t, h, method, tc.ok, p, http.StatusForbidden)
				assert.Contains(t, body, `"forbidden"`)
			}
			want := http.StatusOK
			if tc.route == "GET /connections" {
				want = http.StatusNotImplemented // no gateway: the 200 is in TestEndpointsAuthAndAudit
			}
			body = callAs(t, h, method, tc.ok, "root", want)
			if tc.check != nil {
				tc.check(t, body)
			}
			if tc.write != "" {
				assert.Contains(t, logs.String(), `msg="ops: admin action" action=`+tc.write+` principal=root`)
				assert.Equal(t, 1.0, counterValue(t, reg, tc.write))
			}
		})
	}
	for _, r := range ops.Routes(h) {
		assert.True(t, covered[r], "route %s has no test of its 401, 400, 403 and success", r)
	}
}

// callAs serves one request with token (none when "") and requires the
// status; it returns the body.
func callAs(t *testing.T, h http.Handler, method, target, token string, status int) string {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := newRecorder()
	h.ServeHTTP(w, req)
	require.Equal(t, status, w.Code, "%s %s as %q: %s", method, target, token, w.Body)
	return w.Body.String()
}

// A refused schema registration is logged as a failed action and counted
// with result error; with admin actions off it is refused before the
// registry is asked.
func TestSchemaRegisterAudit(t *testing.T) {
	t.Parallel()
	logs := &syncBuf{}
	reg := prometheus.NewRegistry()
	schemas := &fakeSchemas{vs: map[string][]ops.SchemaVersion{}}
	h := newHandler(t, ops.Config{Bus: newBus(t), Schemas: schemas, Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	w := do(t, h, http.MethodPost, "/ops/schemas", `{"topic":"orders","schema":"true","rule":"sideways"}`)
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "rule")
	assert.Contains(t, logs.String(), `msg="ops: admin action failed" action=schema_register`)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, 1)
	require.Len(t, mfs[0].GetMetric(), 1)
	assert.Equal(t, "error", mfs[0].GetMetric()[0].GetLabel()[1].GetValue())

	ro := newHandler(t, ops.Config{Bus: newBus(t), Schemas: schemas, ReadOnly: true})
	w = do(t, ro, http.MethodPost, "/ops/schemas", `{"topic":"orders","schema":"true"}`)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "read_only")
	assert.Empty(t, schemas.vs, "nothing registered")
}
