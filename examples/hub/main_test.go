package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/ws/wsclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain runs the hub's main when runMain asks for it (flags_test.go).
// Otherwise it runs the tests as testmongo.Main does (the shared client
// disconnected, then no goroutine leaked), and fails when a test left the
// default SQLite file (promlib.db) in the package's directory: tests keep
// their events in memory or in a temporary directory.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" { // runMain: be the hub
		main()
		os.Exit(0)
	}
	_, err := os.Stat(defaultSQLiteFile)
	existed := err == nil
	code := m.Run()
	testmongo.Close()
	if _, err := os.Stat(defaultSQLiteFile); err == nil && !existed {
		fmt.Fprintf(os.Stderr, "a test wrote %s into the package's directory: give the hub -store memory or a file in t.TempDir()\n", defaultSQLiteFile)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// syncBuffer is a log sink safe for the hub's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startHub runs the hub on a free port until the test ends.
func startHub(t *testing.T, env map[string]string) (addr string, logs *syncBuffer) {
	t.Helper()
	addr, logs, stop := runHub(t, env)
	t.Cleanup(stop)
	return addr, logs
}

// runHub runs the hub on a free port; stop shuts it down and checks that
// it stopped gracefully. Unless args give -store or env MONGO_URL, the hub
// keeps its events in memory, so that no test writes the default SQLite
// file into the package's directory.
func runHub(t *testing.T, env map[string]string, args ...string) (addr string, logs *syncBuffer, stop func()) {
	t.Helper()
	if !slices.Contains(args, "-store") && env["MONGO_URL"] == "" {
		args = append([]string{"-store", "memory"}, args...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs = &syncBuffer{}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), func(k string) string { return env[k] }, logs, func(a string) { ready <- a })
	}()
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("hub did not start: %v\n%s", err, logs)
	}
	return addr, logs, func() {
		cancel()
		require.NoError(t, <-done, "graceful shutdown")
		assert.Contains(t, logs.String(), "hub stopped")
	}
}

func TestHubEndToEnd(t *testing.T) {
	addr, logs := startHub(t, map[string]string{"WS_TOKEN": "tok"})
	assert.NotContains(t, logs.String(), "accepts ANY client")
	ctx := context.Background()

	// Clients of the seed documents dial the bare host; /ws works too.
	for _, path := range []string{"/", "/ws"} {
		c, err := wsclient.Dial(ctx, "ws://"+addr+path, &wsclient.Options{Token: "tok"})
		require.NoError(t, err, path)
		got := make(chan string, 1)
		_, err = c.Subscribe(ctx, "hub.test", "g"+strings.Trim(path, "/"), func(ctx context.Context, m *wsclient.Message) error {
			got <- string(m.Payload)
			return nil
		})
		require.NoError(t, err)

		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/publish/hub.test", strings.NewReader(`{"via":"http"}`))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, "%v", out)
		assert.NotEmpty(t, out["id"])
		select {
		case p := <-got:
			assert.JSONEq(t, `{"via":"http"}`, p)
		case <-time.After(5 * time.Second):
			t.Fatal("no delivery")
		}
		require.NoError(t, c.Close())
	}

	_, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: "nope"})
	assert.ErrorIs(t, err, wsproto.ErrAuthFailed)

	resp, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	var health map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&health))
	resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	keys := make([]string, 0, len(health))
	for k := range health {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"connections", "authenticated", "subscriptions", "queued", "max_queued", "leases", "publishing"}, keys,
		"/healthz answers snake_case keys, as every JSON of the hub")
}

// TestHubShutdownClosesConnections: a connected client sees 1001 when the
// hub stops.
func TestHubShutdownClosesConnections(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-store", "memory"}, func(string) string { return "" }, logs, func(a string) { ready <- a })
	}()
	addr := <-ready
	assert.Contains(t, logs.String(), "accepts ANY client", "open access is announced loudly")
	c, err := wsclient.Dial(context.Background(), "ws://"+addr, &wsclient.Options{DisableReconnect: true})
	require.NoError(t, err)
	_, err = c.Publish(context.Background(), "t", []byte(`1`))
	require.NoError(t, err)
	cancel()
	require.NoError(t, <-done)
	require.Eventually(t, func() bool {
		_, err := c.Publish(context.Background(), "t", []byte(`1`))
		return errors.Is(err, wsclient.ErrDisconnected)
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Close())
}

func TestHubFlags(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, &out, nil)
	assert.ErrorIs(t, err, flag.ErrHelp)
	for _, s := range []string{
		"HUB_ADDR", "WS_TOKEN", "JWT_SECRET", "JWT_JWKS_URL", "JWT_AUD", "JWT_ISS", "JWT_LEEWAY", "MONGO_URL", "MONGO_DB",
		"-addr", "-max-inflight", "-jwt-leeway", "-store", "sqlite:PATH", "promlib.db", "PG_SCHEMA", "4401", `{"error":{"code"`,
		"Dashboard: http://127.0.0.1:8080/ops/", "-ops-read-only", "-ops-chart-window", "-ops-chart-interval", "-ops-chart-groups",
	} {
		assert.Contains(t, out.String(), s)
	}
	s, err := parseFlags(nil, func(k string) string {
		return map[string]string{"HUB_ADDR": "127.0.0.1:9", "JWT_LEEWAY": "3s"}[k]
	}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9", s.addr)
	assert.Equal(t, 3*time.Second, s.jwtLeeway)
	_, err = parseFlags(nil, func(k string) string { return map[string]string{"JWT_LEEWAY": "soon"}[k] }, io.Discard)
	assert.ErrorContains(t, err, "JWT_LEEWAY")
	_, err = parseFlags([]string{"-jwt-leeway", "-1s"}, func(string) string { return "" }, io.Discard)
	assert.ErrorContains(t, err, "-jwt-leeway")
	err = run(context.Background(), []string{"-addr", "127.0.0.1:0"}, func(k string) string {
		return map[string]string{"MONGO_URL": "notmongo://x"}[k]
	}, io.Discard, nil)
	assert.ErrorContains(t, err, "MONGO_URL")
}
