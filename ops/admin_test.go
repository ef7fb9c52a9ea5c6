package ops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// syncBuf is a log sink safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type fakeConns []ops.Connection

func (f fakeConns) Connections() []ops.Connection { return f }

// Every endpoint answers 401 without a token, 403 without the right
// scope, 400 for bad parameters and 200 when all is well; every write is
// logged with its principal and counted.
func TestEndpointsAuthAndAudit(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	ctx := context.Background()
	logs := &syncBuf{}
	reg := prometheus.NewRegistry()
	since := time.Now().Add(-time.Minute)
	h := newHandler(t, ops.Config{
		Bus: bus, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Verifier: testVerifier(t, map[string][]string{
			"root":   {"inspect:**", "admin:**"},
			"reader": {"inspect:**"},
			"other":  {"inspect:else", "admin:else"},
		}),
		Connections: fakeConns{{ID: "c1", Principal: "alice", RemoteAddr: "10.0.0.1:5000", Since: since,
			Subscriptions: []string{"orders/billing", "secret/x", "orders"}, QueueDepth: 2,
			Subs: []ops.Subscription{{Kind: "group", Topic: "orders", Group: "billing"}, {Kind: "group", Topic: "secret", Group: "x"}, {Kind: "live", Topic: "orders"}}}},
	})
	publishN(t, bus, "orders", 5)
	// A group with a cursor, a dead letter of it, and no live member.
	s, err := bus.Subscribe(ctx, "orders", "billing", func(ctx context.Context, d *event.Delivery) error {
		if d.Seq == 2 && d.Headers[event.HeaderRedriveID] == "" {
			return assert.AnError
		}
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(1))
	require.NoError(t, err)
	var dead []event.Record
	require.Eventually(t, func() bool {
		dead, err = bus.Store().Read(ctx, "orders.dlq", 0, 10)
		return err == nil && len(dead) == 1
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, s.Close())
	_, err = bus.Publish(ctx, "orders.dlq", []byte(`1`), event.WithHeaders(map[string]string{
		event.HeaderDLQTopic: "orders", event.HeaderDLQGroup: "billing", event.HeaderDLQID: "x", event.HeaderDLQSeq: "1"}))
	require.NoError(t, err)

	call := func(method, target, token string) (int, string) {
		req, _ := http.NewRequest(method, target, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := newRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	tests := []struct {
		name, method, ok, bad, badParam string
		write                           string // the action a write logs
	}{
		{"groups", "GET", "/ops/groups?topic=orders", "/ops/groups?topic=a%20b", "topic", ""},
		{"events", "GET", "/ops/events?topic=orders&limit=2", "/ops/events?topic=orders&limit=0", "limit", ""},
		{"dlq", "GET", "/ops/dlq?topic=orders&group=billing", "/ops/dlq?topic=orders", "group", ""},
		{"connections", "GET", "/ops/connections", "/ops/connections?x=1", "x", ""},
		{"purge", "POST", "/ops/dlq/purge?topic=orders&group=billing&ids=" + dead[0].ID, "/ops/dlq/purge?topic=orders&group=billing&ids=a,,b", "ids", "purge"},
		{"redrive", "POST", "/ops/dlq/redrive?topic=orders&group=billing", "/ops/dlq/redrive?topic=orders&group=billing&limit=0", "limit", "redrive"},
		{"cursor", "POST", "/ops/cursor?topic=orders&group=billing&to=seq&seq=3", "/ops/cursor?topic=orders&group=billing&to=later", "to", "cursor_reset"},
		{"delete", "POST", "/ops/groups/delete?topic=orders&group=billing", "/ops/groups/delete?topic=orders&group=billing&force=maybe", "force", "group_delete"},
		{"partitions", "POST", "/ops/topics/partitions?topic=orders&partitions=64", "/ops/topics/partitions?topic=orders&partitions=0", "partitions", "topic_partitions"},
	}
	for _, tc := range tests {
		code, body := call(tc.method, tc.ok, "")
		assert.Equal(t, http.StatusUnauthorized, code, "%s without a token: %s", tc.name, body)
		code, body = call(tc.method, tc.bad, "root")
		assert.Equal(t, http.StatusBadRequest, code, "%s: %s", tc.name, body)
		assert.Contains(t, body, tc.badParam, tc.name)
		if tc.name != "connections" {
			forbidden := "other"
			if tc.write != "" {
				forbidden = "reader" // may look, may not change
			}
			code, body = call(tc.method, tc.ok, forbidden)
			assert.Equal(t, http.StatusForbidden, code, "%s as %s: %s", tc.name, forbidden, body)
		}
		code, body = call(tc.method, tc.ok, "root")
		require.Equal(t, http.StatusOK, code, "%s: %s", tc.name, body)
		if tc.write != "" {
			assert.Contains(t, logs.String(), `msg="ops: admin action" action=`+tc.write+` principal=root`, tc.name)
			assert.Equal(t, 1.0, counterValue(t, reg, tc.write), tc.name)
		}
		switch tc.name {
		case "events":
			var ev ops.EventsResponse
			require.NoError(t, json.Unmarshal([]byte(body), &ev))
			require.Len(t, ev.Events, 2)
			assert.Equal(t, uint64(5), ev.Events[0].Seq, "newest first")
			assert.Equal(t, uint64(4), ev.Events[1].Seq)
			assert.Equal(t, uint64(4), ev.Next)
			assert.Equal(t, `{"n":1}`, ev.Events[0].Preview)
		case "connections":
			var cs ops.ConnectionsResponse
			require.NoError(t, json.Unmarshal([]byte(body), &cs))
			require.Len(t, cs.Connections, 1)
			assert.Equal(t, "alice", cs.Connections[0].Principal)
			assert.Equal(t, []ops.Subscription{{Kind: "group", Topic: "orders", Group: "billing"}, {Kind: "group", Topic: "secret", Group: "x"}, {Kind: "live", Topic: "orders"}}, cs.Connections[0].Subs,
				"the live subscription is listed with its kind")
			assert.GreaterOrEqual(t, cs.Connections[0].AgeMs, int64(60000))
			_, body = call("GET", "/ops/connections", "other")
			assert.Contains(t, body, `"connections":[]`, "a connection on topics the caller may not inspect is hidden")
		case "groups":
			var gs ops.GroupsResponse
			require.NoError(t, json.Unmarshal([]byte(body), &gs))
			require.Len(t, gs.Groups, 1)
			assert.Equal(t, "billing", gs.Groups[0].Group)
		case "dlq":
			var d event.DeadLetterPage
			require.NoError(t, json.Unmarshal([]byte(body), &d))
			assert.Len(t, d.Records, 2)
		case "cursor":
			c, err := bus.Cursor(ctx, "orders", "billing")
			require.NoError(t, err)
			assert.Equal(t, uint64(3), c.Seq)
		case "delete":
			_, err := bus.Cursor(ctx, "orders", "billing")
			assert.ErrorIs(t, err, event.ErrNotFound)
		case "partitions":
			assert.JSONEq(t, `{"topic":"orders","partitions":64}`, body)
			n, err := bus.Partitions(ctx, "orders")
			require.NoError(t, err)
			assert.Equal(t, 64, n)
			_, body = call("GET", "/ops/topics?topic=orders", "root")
			assert.Contains(t, body, `"partitions":64`, "the topics view shows the stored count")
			code, body = call("POST", "/ops/topics/partitions?topic=orders&partitions=2", "root")
			assert.Equal(t, http.StatusBadRequest, code, body)
			assert.Contains(t, body, "cannot be removed", "a lower count is refused, saying why")
		}
	}
}

// counterValue returns promlib_ops_actions_total{action, result="ok"}.
func counterValue(t *testing.T, reg *prometheus.Registry, action string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "promlib_ops_actions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["action"] == action && labels["result"] == "ok" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A cursor reset and a group delete are refused while the group has live
// members (409 naming them) unless forced, and refused whole when admin
// actions are off. The cursor's to is earliest, latest, seq (resume after
// it), or ts (time, its name of earlier releases).
func TestWritesRefusedWhileLive(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	ctx := context.Background()
	h := newHandler(t, ops.Config{Bus: bus})
	publishN(t, bus, "orders", 3)
	s, err := bus.Subscribe(ctx, "orders", "billing", func(context.Context, *event.Delivery) error { return nil }, event.FromEarliest())
	require.NoError(t, err)
	st, err := bus.GroupStatus(ctx, "orders", "billing")
	require.NoError(t, err)
	require.Len(t, st.Members, 1)
	w := do(t, h, "POST", "/ops/cursor", `{"topic":"orders","group":"billing","to":"earliest"}`)
	assert.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "live members")
	assert.Contains(t, w.Body.String(), st.Members[0], "the answer names the members")
	assert.Contains(t, w.Body.String(), `"conflict"`)
	w = do(t, h, "POST", "/ops/groups/delete", `{"topic":"orders","group":"billing"}`)
	assert.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), st.Members[0])
	require.NoError(t, s.Close())

	var c event.ResetResult
	for _, to := range []string{"ts", "time"} {
		w = do(t, h, "POST", "/ops/cursor", `{"topic":"orders","group":"billing","to":"`+to+`","ts":0}`)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &c))
		assert.Equal(t, uint64(0), c.Seq, "every record has ts >= 0")
		assert.Equal(t, event.AtTS(0), c.To)
	}
	w = do(t, h, "POST", "/ops/cursor", `{"topic":"orders","group":"billing","to":"seq","seq":9}`)
	assert.Equal(t, http.StatusBadRequest, w.Code, "past the head: %s", w.Body.String())
	w = do(t, h, "POST", "/ops/cursor", `{"topic":"orders","group":"billing","to":"seq","seq":2}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &c))
	assert.Equal(t, uint64(2), c.Seq, "the group resumes after seq")
	assert.Equal(t, event.AtSeq(3), c.To)
	w = do(t, h, "POST", "/ops/cursor", `{"topic":"orders","group":"billing","to":"latest"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &c))
	assert.Equal(t, uint64(3), c.Seq)
	assert.Equal(t, map[int]uint64{0: 2}, c.Previous)
	w = do(t, h, "POST", "/ops/cursor", `{"topic":"orders","group":"billing","to":"ts"}`)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "ts")

	ro := newHandler(t, ops.Config{Bus: bus, ReadOnly: true})
	w = do(t, ro, "POST", "/ops/groups/delete", `{"topic":"orders","group":"billing"}`)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "read_only")

	// Forced, the delete takes the group from its members first.
	s, err = bus.Subscribe(ctx, "orders", "billing", func(context.Context, *event.Delivery) error { return nil })
	require.NoError(t, err)
	w = do(t, h, "POST", "/ops/groups/delete", `{"topic":"orders","group":"billing","force":"true"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, `{"topic":"orders","group":"billing","deleted":true}`, w.Body.String())
	require.NoError(t, s.Close())
	w = do(t, h, "POST", "/ops/groups/delete", `{"topic":"orders","group":"billing"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = do(t, h, "GET", "/ops/lag?topic=orders&group=billing", "")
	assert.Equal(t, http.StatusNotFound, w.Code, w.Body.String())
}

// The in-flight records of a group: those of this process with their
// attempt and lease end, and the attempts of every member from the store.
func TestInflightOfAGroup(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	ctx := context.Background()
	h := newHandler(t, ops.Config{Bus: bus})
	held := make(chan *event.Delivery, 1)
	_, err := bus.Subscribe(ctx, "orders", "billing", func(_ context.Context, d *event.Delivery) error {
		held <- d
		return nil
	}, event.WithManualAck())
	require.NoError(t, err)
	r, err := bus.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)
	d := <-held
	// What another member wrote of its attempts (members write their
	// state with their cursor commits).
	gss := bus.Store().(event.GroupStateStore)
	require.NoError(t, gss.UpdateGroupState(ctx, event.PartitionRef{Topic: "orders", Group: "billing", Partition: r.Partition},
		event.GroupStateUpdate{Attempts: map[uint64]int{r.Seq: 3}}, event.Fence{}))
	var resp ops.InflightResponse
	getJSON(t, h, "/ops/inflight?topic=orders&group=billing", &resp)
	require.Len(t, resp.Attempts, 1)
	require.Len(t, resp.Deliveries, 1)
	assert.Equal(t, r.ID, resp.Deliveries[0].ID)
	assert.Equal(t, 1, resp.Deliveries[0].Attempt)
	assert.Equal(t, "in_flight", resp.Deliveries[0].State)
	assert.WithinDuration(t, d.Deadline, resp.Deliveries[0].Deadline, time.Second)
	assert.Equal(t, ops.UnsettledRecord{Partition: r.Partition, Seq: r.Seq, Attempts: 3}, resp.Attempts[0])
	require.NoError(t, d.Ack(ctx))

	w := do(t, h, "GET", "/ops/inflight?group=billing", "")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "topic")
}

// A key-ordered group's records held behind their key show as held, apart
// from those waiting for a redelivery, in /ops/inflight and /ops/topics.
func TestInflightShowsHeld(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	ctx := context.Background()
	h := newHandler(t, ops.Config{Bus: bus})
	for range 3 {
		_, err := bus.Publish(ctx, "orders", []byte(`1`), event.WithKey("k"))
		require.NoError(t, err)
	}
	held := make(chan *event.Delivery, 3)
	_, err := bus.Subscribe(ctx, "orders", "billing", func(_ context.Context, d *event.Delivery) error {
		held <- d
		return nil
	}, event.FromEarliest(), event.WithManualAck(), event.WithKeyOrdered(), event.WithMaxPerKey(3), event.WithMaxInFlight(10))
	require.NoError(t, err)
	d := <-held
	var resp ops.InflightResponse
	require.Eventually(t, func() bool {
		getJSON(t, h, "/ops/inflight?topic=orders", &resp)
		return resp.Held == 2
	}, 5*time.Second, time.Millisecond, "%+v", resp)
	require.Len(t, resp.Groups, 1)
	assert.Equal(t, 1, resp.Groups[0].InFlight)
	assert.Equal(t, 2, resp.Groups[0].Waiting)
	assert.Equal(t, 2, resp.Groups[0].Held)
	var topics ops.TopicsResponse
	getJSON(t, h, "/ops/topics?topic=orders", &topics)
	require.Len(t, topics.Topics, 1)
	assert.Equal(t, 2, topics.Topics[0].Held)
	require.Len(t, topics.Topics[0].Groups, 1)
	require.NotNil(t, topics.Topics[0].Groups[0].Local)
	assert.Equal(t, 2, topics.Topics[0].Groups[0].Local.Held)

	require.NoError(t, d.Ack(ctx))
	require.Eventually(t, func() bool {
		getJSON(t, h, "/ops/inflight?topic=orders", &resp)
		return resp.Held == 1 && resp.InFlight == 1
	}, 5*time.Second, time.Millisecond, "the next of the key in flight, one held: %+v", resp)
}
