package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/ws/wsclient"
)

// The hubs the tests run promctl against: the hub of examples/hub, built
// once into bin, with its events in memory; open admits anyone, secured
// wants the static token testToken. A test that needs a hub of its own
// (on a SQLite file, say) starts one with runHub.
var hubs struct {
	bin           string
	open, secured *hubProc
}

const testToken = "promctl-test-token"

// TestMain builds the hub, starts the two hubs on free loopback ports,
// runs the tests, stops the hubs, and fails when a goroutine outlived the
// tests.
func TestMain(m *testing.M) {
	for _, k := range []string{envURL, envToken} {
		_ = os.Unsetenv(k)
	}
	code := func() int {
		dir, err := os.MkdirTemp("", "promctl-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "hub")
		build := exec.Command("go", "build", "-o", bin, "../../examples/hub")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build ./examples/hub: %v\n%s", err, out)
			return 1
		}
		hubs.bin = bin
		if hubs.open, err = startHub(bin, dir, "memory"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer hubs.open.stop()
		if hubs.secured, err = startHub(bin, dir, "memory", "WS_TOKEN="+testToken); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer hubs.secured.stop()
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// hubProc is a running hub.
type hubProc struct {
	cmd      *exec.Cmd
	url      string
	logs     *logWatch
	stopOnce sync.Once
}

// startHub starts the hub at bin on a free loopback port with its events
// in store (the hub's -store), with env added to an environment cleared
// of the variables the hub reads, and waits until it listens.
func startHub(bin, dir, store string, env ...string) (*hubProc, error) {
	cmd := exec.Command(bin, "-store", store, "-addr", "127.0.0.1:0")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "HUB_") || strings.HasPrefix(k, "JWT_") || strings.HasPrefix(k, "MONGO_") ||
			strings.HasPrefix(k, "PG_") || k == "WS_TOKEN" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, env...)
	logs := &logWatch{addr: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the hub: %w", err)
	}
	h := &hubProc{cmd: cmd, logs: logs}
	select {
	case addr := <-logs.addr:
		h.url = "http://" + addr
		return h, nil
	case <-time.After(30 * time.Second):
		h.stop()
		return nil, fmt.Errorf("the hub did not listen within 30s; its log:\n%s", logs.String())
	}
}

// runHub starts a hub of the test's own on store (the hub's -store),
// stopped when the test ends.
func runHub(t *testing.T, store string, env ...string) *hubProc {
	t.Helper()
	h, err := startHub(hubs.bin, t.TempDir(), store, env...)
	require.NoError(t, err)
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("the log of the hub on %s:\n%s", store, h.logs.String())
		}
	})
	return h
}

// stop shuts the hub down (SIGINT, then SIGKILL after 10 s); calls after
// the first do nothing.
func (h *hubProc) stop() {
	h.stopOnce.Do(func() {
		_ = h.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = h.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = h.cmd.Process.Kill()
			<-done
		}
	})
}

// logWatch keeps a hub's log and finds the address it listens on.
type logWatch struct {
	mu   sync.Mutex
	b    bytes.Buffer
	addr chan string
	seen bool
}

var listening = regexp.MustCompile(`msg="hub listening" addr=(\S+)`)

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if !l.seen {
		if m := listening.FindSubmatch(l.b.Bytes()); m != nil {
			l.seen = true
			l.addr <- string(m[1])
		}
	}
	return len(p), nil
}

func (l *logWatch) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// result is what a run of promctl gave.
type result struct {
	code   int
	stdout string
	stderr string
}

// promctl runs promctl in-process with args against the open hub (unless
// args give -url first), stdin as its input.
func promctl(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return promctlAt(t, hubs.open.url, stdin, args...)
}

// promctlAt runs promctl with -url hubURL.
func promctlAt(t *testing.T, hubURL, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	code := run(ctx, append([]string{"-url", hubURL}, args...), strings.NewReader(stdin), &o, &e)
	return result{code, o.String(), e.String()}
}

// ok checks that r succeeded and wrote nothing to stderr.
func (r result) ok(t *testing.T) result {
	t.Helper()
	require.Equal(t, 0, r.code, "exit status; stderr: %s", r.stderr)
	require.Empty(t, r.stderr)
	return r
}

// fails checks that r failed with status code and one line on stderr
// holding each of want.
func (r result) fails(t *testing.T, code int, want ...string) {
	t.Helper()
	require.Equal(t, code, r.code, "exit status; stdout: %s; stderr: %s", r.stdout, r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "promctl: "), "stderr: %q", r.stderr)
	require.True(t, strings.HasSuffix(r.stderr, "\n"), "stderr: %q", r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "stderr is one line: %q", r.stderr)
	for _, w := range want {
		assert.Contains(t, r.stderr, w)
	}
}

// lines returns the non-empty lines of s.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// exported runs promctl export and returns the records of topic.
func exported(t *testing.T, hubURL, topic string) []event.Record {
	t.Helper()
	r := promctlAt(t, hubURL, "", "export", topic).ok(t)
	var recs []event.Record
	for _, l := range lines(r.stdout) {
		var rec event.Record
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		recs = append(recs, rec)
	}
	return recs
}

// dial connects a Go client to the open hub for the tests' own
// subscribers; it is closed when the test ends.
func dial(t *testing.T) *wsclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(hubs.open.url, "http")+"/ws", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// groupStatus reads a group's status with promctl lag -o json.
func groupStatus(t *testing.T, topic, group string) event.GroupStatus {
	t.Helper()
	r := promctl(t, "", "lag", topic, group, "-o", "json").ok(t)
	var st event.GroupStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	return st
}

// liveViewers counts the live subscriptions of topic at the open hub.
func liveViewers(t *testing.T, topic string) int {
	t.Helper()
	resp, err := http.Get(hubs.open.url + "/ops/connections")
	require.NoError(t, err)
	defer resp.Body.Close()
	var cr ops.ConnectionsResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&cr))
	n := 0
	for _, c := range cr.Connections {
		for _, s := range c.Subs {
			if s.Kind == "live" && s.Topic == topic {
				n++
			}
		}
	}
	return n
}

// background runs promctl in a goroutine; wait returns its result.
func background(t *testing.T, args ...string) (wait func() result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := make(chan result, 1)
	go func() {
		var o, e bytes.Buffer
		code := run(ctx, append([]string{"-url", hubs.open.url}, args...), strings.NewReader(""), &o, &e)
		done <- result{code, o.String(), e.String()}
	}()
	var once sync.Once
	var res result
	wait = func() result {
		once.Do(func() {
			select {
			case res = <-done:
			case <-time.After(30 * time.Second):
				cancel()
				res = <-done
				t.Errorf("promctl %q did not end", args)
			}
			cancel()
		})
		return res
	}
	t.Cleanup(func() { cancel(); wait() })
	return wait
}
