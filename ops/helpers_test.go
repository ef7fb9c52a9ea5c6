package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// newBus returns a Bus over a memory store that commits cursors often,
// closed when the test ends.
func newBus(t *testing.T) *event.Bus {
	t.Helper()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{CommitInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, bus.Close(ctx))
	})
	return bus
}

func newHandler(t *testing.T, cfg ops.Config) *ops.Handler {
	t.Helper()
	h, err := ops.NewHandler(cfg)
	require.NoError(t, err)
	return h
}

// do serves one request and returns the status and the recorder.
func do(t *testing.T, h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// getJSON serves a GET, requires 200 and decodes the body into v.
func getJSON(t *testing.T, h http.Handler, target string, v any) {
	t.Helper()
	w := do(t, h, http.MethodGet, target, "")
	require.Equal(t, http.StatusOK, w.Code, "GET %s: %s", target, w.Body)
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	reflect.ValueOf(v).Elem().SetZero() // no stale fields from an earlier decode
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), v))
}

// errorBody is the JSON error shape.
type errorBody struct {
	Error struct {
		Code string `json:"code"`
		Msg  string `json:"msg"`
	} `json:"error"`
}

func publishN(t *testing.T, bus *event.Bus, topic string, n int) {
	t.Helper()
	ctx := context.Background()
	const batch = 500
	for i := 0; i < n; i += batch {
		recs := make([]event.Record, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			r, err := bus.NewRecord(topic, []byte(`{"n":1}`), event.PublishOptions{})
			require.NoError(t, err)
			recs = append(recs, r)
		}
		_, err := bus.Append(ctx, topic, recs)
		require.NoError(t, err)
	}
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
