package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// A listing shows only the topics and groups the caller may inspect: with
// inspect on a.* only, /ops/topics and /ops/inflight without a topic show
// the a.* topics and their groups, nothing of b.secret, and the sums of
// /ops/inflight count only what is shown.
func TestListingsShowOnlyInspectable(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{
		Bus:    bus,
		Topics: []string{"a.x", "a.y", "b.secret"},
		Verifier: testVerifier(t, map[string][]string{
			"a":   {"inspect:a.*"},
			"all": {"inspect:**"},
		}),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	block := func(context.Context, *event.Delivery) error { <-release; return nil }
	for _, tg := range [][2]string{{"a.x", "billing"}, {"b.secret", "payroll"}} {
		sub, err := bus.Subscribe(ctx, tg[0], tg[1], block, event.FromEarliest())
		require.NoError(t, err)
		defer func() { _ = sub.Close() }()
		_, err = bus.Publish(ctx, tg[0], []byte(`1`))
		require.NoError(t, err)
	}
	defer close(release) // before the subscriptions close
	get := func(target, token string, v any) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := newRecorder()
		h.ServeHTTP(w, req)
		require.Equal(t, http.StatusOK, w.Code, "%s: %s", target, w.Body)
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), v))
		return w.Body.String()
	}
	inflight := func(token string) ops.InflightResponse {
		var r ops.InflightResponse
		require.Eventually(t, func() bool {
			r = ops.InflightResponse{}
			get("/ops/inflight", "all", &r)
			return r.InFlight == 2
		}, 10*time.Second, 10*time.Millisecond, "both deliveries in flight")
		r = ops.InflightResponse{}
		get("/ops/inflight", token, &r)
		return r
	}

	var topics ops.TopicsResponse
	body := get("/ops/topics", "a", &topics)
	var names []string
	for _, ts := range topics.Topics {
		names = append(names, ts.Topic)
	}
	assert.Equal(t, []string{"a.x", "a.y"}, names)
	assert.False(t, strings.Contains(body, "secret") || strings.Contains(body, "payroll"), body)

	r := inflight("a")
	require.Len(t, r.Groups, 1, "%+v", r)
	assert.Equal(t, "a.x", r.Groups[0].Topic)
	assert.Equal(t, "billing", r.Groups[0].Group)
	assert.Equal(t, 1, r.InFlight, "the sums count only the groups shown")

	// The host's view, through the Handler, holds everything.
	st, err := h.TopicState(ctx, "b.secret")
	require.NoError(t, err)
	require.Len(t, st.Groups, 1)
	assert.Equal(t, "payroll", st.Groups[0].Group)

	// inspect:** sees everything.
	topics = ops.TopicsResponse{}
	get("/ops/topics", "all", &topics)
	assert.Len(t, topics.Topics, 3)
	assert.Len(t, inflight("all").Groups, 2)
}

// A caller without a valid token learns nothing of the topics: a bad
// parameter that names a topic is answered 401, and the body does not
// name it.
func TestUnauthenticatedLearnsNoTopic(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	_, err := bus.Publish(context.Background(), "secret.orders", []byte(`1`))
	require.NoError(t, err)
	h := newHandler(t, ops.Config{Bus: bus, Topics: []string{"secret.orders"}, Verifier: testVerifier(t, map[string][]string{"t": {"inspect:**"}})})
	for _, target := range []string{
		"/ops/topics?topic=secret.orders&x=1",
		"/ops/inflight?topic=secret.orders&limit=1",
		"/ops/cursors?topic=secret.orders&topic=secret.orders",
		"/ops/lag?topic=secret.orders&group=g..h",
		"/ops/latest?topic=secret.orders",
		"/ops/dlq?topic=secret.orders&group=g&limit=0",
		"/ops/topics",
	} {
		for _, token := range []string{"", "wrong"} {
			req, _ := http.NewRequest(http.MethodGet, target, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			w := newRecorder()
			h.ServeHTTP(w, req)
			assert.Equal(t, http.StatusUnauthorized, w.Code, "%s (token %q): %s", target, token, w.Body)
			assert.NotContains(t, w.Body.String(), "secret", "%s (token %q)", target, token)
		}
	}
	w := newRecorder()
	req, _ := http.NewRequest(http.MethodPost, "/ops/dlq/redrive", strings.NewReader(`{"topic":"secret.orders","x":1}`))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, req)
	assert.Equal(t, http.StatusUnauthorized, w.Code, w.Body.String())
	assert.NotContains(t, w.Body.String(), "secret")
}
