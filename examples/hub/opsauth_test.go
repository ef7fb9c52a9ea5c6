package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/ws/wsclient"
)

// TestHubOpsScopes: in JWT mode the ops reads need an inspect: scope on
// their topic and a redrive an admin: scope (403 without), and the
// listings show only the topics the token may inspect.
func TestHubOpsScopes(t *testing.T) {
	addr, _ := startHub(t, jwtHubEnv)
	hour := time.Now().Add(time.Hour)
	publisher := mintHub(t, "svc", "promlib", hour, "publish:**")
	// The memory store lists no topics: subscribers make them known.
	c, err := wsclient.Dial(context.Background(), "ws://"+addr+"/ws", &wsclient.Options{
		Token: mintHub(t, "svc", "promlib", hour, "subscribe:**"), DisableReconnect: true,
	})
	require.NoError(t, err)
	defer c.Close()
	for _, topic := range []string{"a.orders", "b.payroll"} {
		_, err := c.Subscribe(context.Background(), topic, "g", func(context.Context, *wsclient.Message) error { return nil })
		require.NoError(t, err)
		status, out := httpPublish(t, addr, topic, publisher)
		require.Equal(t, http.StatusOK, status, "%v", out)
	}
	do := func(method, path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+addr+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	none := mintHub(t, "svc", "promlib", hour, "publish:** subscribe:** replay:**")
	ops := mintHub(t, "op", "promlib", hour, "inspect:a.** admin:a.**")
	for _, path := range []string{
		"/ops/cursors?topic=a.orders", "/ops/lag?topic=a.orders&group=g", "/ops/inflight?topic=a.orders",
		"/ops/topics?topic=a.orders", "/ops/latest?topic=a.orders&key=k", "/ops/dlq?topic=a.orders&group=g",
	} {
		status, body := do(http.MethodGet, path, none)
		assert.Equal(t, http.StatusForbidden, status, "%s without inspect: %s", path, body)
		assert.Contains(t, body, `"forbidden"`, path)
		status, body = do(http.MethodGet, path, ops)
		assert.NotEqual(t, http.StatusForbidden, status, "%s with inspect: %s", path, body)
		assert.NotEqual(t, http.StatusUnauthorized, status, "%s with inspect: %s", path, body)
		status, _ = do(http.MethodGet, strings.Replace(path, "a.orders", "b.payroll", 1), ops)
		assert.Equal(t, http.StatusForbidden, status, "%s of another topic", path)
	}
	status, body := do(http.MethodPost, "/ops/dlq/redrive?topic=a.orders&group=g", none)
	assert.Equal(t, http.StatusForbidden, status, "redrive without admin: %s", body)
	status, body = do(http.MethodPost, "/ops/dlq/redrive?topic=a.orders&group=g", mintHub(t, "op", "promlib", hour, "inspect:**"))
	assert.Equal(t, http.StatusForbidden, status, "inspect does not redrive: %s", body)
	status, body = do(http.MethodPost, "/ops/dlq/redrive?topic=a.orders&group=g", ops)
	assert.Equal(t, http.StatusOK, status, "redrive with admin: %s", body)

	// The listings show what the token may inspect, and nothing to a token
	// without inspect.
	topicsOf := func(token string) []string {
		status, body := do(http.MethodGet, "/ops/topics", token)
		require.Equal(t, http.StatusOK, status, body)
		var resp struct {
			Topics []struct {
				Topic string `json:"topic"`
			} `json:"topics"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &resp))
		var names []string
		for _, ts := range resp.Topics {
			names = append(names, ts.Topic)
		}
		return names
	}
	assert.Contains(t, topicsOf(mintHub(t, "op", "promlib", hour, "inspect:**")), "b.payroll")
	assert.Equal(t, []string{"a.orders"}, topicsOf(ops))
	// A token that may inspect no topic at all is refused the listings.
	for _, path := range []string{"/ops/topics", "/ops/inflight", "/ops/charts", "/ops/settings", "/ops/connections"} {
		status, body = do(http.MethodGet, path, none)
		assert.Equal(t, http.StatusForbidden, status, "%s without inspect: %s", path, body)
		assert.NotContains(t, body, "payroll")
	}
}
