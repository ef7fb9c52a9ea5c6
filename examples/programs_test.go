package examples

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
)

// programs are built once per test binary, by buildPrograms, into a
// scratch directory that TestMain removes.
var programs = []string{"hub", "process", "bench"}

var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildPrograms returns the directory holding the programs, building them
// on the first call: every test runs the same binaries, so one build (a
// link of each program) serves them all.
func buildPrograms(t *testing.T) string {
	t.Helper()
	built.once.Do(func() { built.dir, built.err = build() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

func build() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is needed to build the programs: %w", err)
	}
	dir, err := os.MkdirTemp("", "promlib-programs-")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, p := range programs {
		args = append(args, "./"+p)
	}
	cmd := exec.Command(goTool, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("go build: %w\n%s", err, out)
	}
	return dir, nil
}

// env is the test's environment without the variables the programs read,
// plus set.
func env(set ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "HUB_") || strings.HasPrefix(k, "JWT_") || strings.HasPrefix(k, "MONGO_") || strings.HasPrefix(k, "PG_") || k == "WS_TOKEN" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, set...)
}

func runProgram(t *testing.T, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	// A scratch working directory: the hub's default store is a file there.
	cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = env, &o, &e, t.TempDir()
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("%s %q: %v", filepath.Base(bin), args, err)
	}
	return code, o.String(), e.String()
}

// TestBadFlags runs each program with a bad command line: it exits with
// 2 before doing anything, and says on one line which flag is wrong and
// what it allows.
func TestBadFlags(t *testing.T) {
	dir := buildPrograms(t)
	for _, tt := range []struct {
		prog string
		env  []string
		args []string
		want []string // in the one line of stderr
	}{
		{"process", nil, []string{"-interval", "0"}, []string{"-interval", "above 0"}},
		{"process", nil, []string{"-interval", "-1s"}, []string{"-interval", "above 0"}},
		{"process", nil, []string{"-stale-after", "0"}, []string{"-stale-after", "above -interval"}},
		{"process", nil, []string{"-interval", "1s", "-stale-after", "1s"}, []string{"-stale-after", "above -interval (1s)"}},
		{"process", nil, []string{"-for", "-1s"}, []string{"-for", "0 (until interrupted) or above"}},
		{"process", nil, []string{"-interval", "often"}, []string{"-interval", "often"}},
		{"process", nil, []string{"-maxinflight", "3"}, []string{"-maxinflight", "not defined"}},
		{"process", nil, []string{"now"}, []string{`unexpected argument "now"`}},

		{"hub", nil, []string{"-shutdown-timeout", "-1s"}, []string{"-shutdown-timeout", "above 0"}},
		{"hub", nil, []string{"-read-timeout", "0"}, []string{"-read-timeout", "above 0"}},
		{"hub", nil, []string{"-write-timeout", "0"}, []string{"-write-timeout", "above 0"}},
		{"hub", nil, []string{"-idle-timeout", "-5s"}, []string{"-idle-timeout", "above 0"}},
		{"hub", nil, []string{"-ack-timeout", "0"}, []string{"-ack-timeout", "above 0"}},
		{"hub", nil, []string{"-auth-timeout", "-1s"}, []string{"-auth-timeout", "above 0"}},
		{"hub", nil, []string{"-ping", "0"}, []string{"-ping", "above 0", "negative one to disable"}},
		{"hub", nil, []string{"-max-inflight", "0"}, []string{"-max-inflight", "1 or more"}},
		{"hub", nil, []string{"-read-limit", "10"}, []string{"-read-limit", "1024 or more"}},
		{"hub", nil, []string{"-send-queue", "-1"}, []string{"-send-queue", "1 or more"}},
		{"hub", nil, []string{"-publish-rate", "-1"}, []string{"-publish-rate", "0 (no limit)"}},
		{"hub", nil, []string{"-topic-rate", "NaN"}, []string{"-topic-rate", "finite"}},
		{"hub", nil, []string{"-failed-auth-rate", "0"}, []string{"-failed-auth-rate", "above 0"}},
		{"hub", nil, []string{"-failed-auth-burst", "0"}, []string{"-failed-auth-burst", "1 or more"}},
		{"hub", nil, []string{"-max-failed-auth", "-1"}, []string{"-max-failed-auth", "1 or more"}},
		{"hub", nil, []string{"-jwt-leeway", "-1s"}, []string{"-jwt-leeway", "0 or more"}},
		{"hub", nil, []string{"-log", "loud"}, []string{"-log", "debug, info, warn or error"}},
		{"hub", nil, []string{"-addr", ""}, []string{"-addr", "listen address"}},
		{"hub", nil, []string{"-trusted-proxies", "proxy.internal"}, []string{"-trusted-proxies", "proxy.internal"}},
		{"hub", nil, []string{"-tls-cert", "cert.pem"}, []string{"-tls-cert and -tls-key", "both"}},
		{"hub", []string{"JWT_LEEWAY=soon"}, nil, []string{"JWT_LEEWAY", "0 or more"}},
		{"hub", nil, []string{"-demo", "extra"}, []string{`unexpected argument "extra"`}},
		{"hub", nil, []string{"-store", "redis://cache:6379"}, []string{"-store", `unknown scheme "redis"`, "sqlite:PATH"}},
		{"hub", nil, []string{"-store", "sqlite:"}, []string{"-store", "empty path"}},
		{"hub", nil, []string{"-store", "events.db"}, []string{"-store", "no scheme", "sqlite:events.db"}},
		{"hub", nil, []string{"-store", "postgres://db:port/x"}, []string{"-store", "bad PostgreSQL URL"}},

		{"bench", nil, []string{"-n", "0"}, []string{"-n", "1 or more"}},
		{"bench", nil, []string{"-payload", "8"}, []string{"-payload", "32 or more"}},
		{"bench", nil, []string{"-groups", "-1"}, []string{"-groups", "0 or more"}},
		{"bench", nil, []string{"-mode", "ws", "-groups", "0"}, []string{"-groups 0", "only with -mode bus"}},
		{"bench", nil, []string{"-publishers", "-2"}, []string{"-publishers", "1 or more"}},
		{"bench", nil, []string{"-consumers", "0"}, []string{"-consumers", "1 or more"}},
		{"bench", nil, []string{"-max-inflight", "0"}, []string{"-max-inflight", "1 or more"}},
		{"bench", nil, []string{"-partitions", "0"}, []string{"-partitions", "1 or more"}},
		{"bench", nil, []string{"-rate", "-5"}, []string{"-rate", "0 (unpaced) or more"}},
		{"bench", nil, []string{"-keys", "-1"}, []string{"-keys", "0 or more"}},
		{"bench", nil, []string{"-mode", "ws", "-key-ordered"}, []string{"-key-ordered", "only with -mode bus"}},
		{"bench", nil, []string{"-warmup", "-1"}, []string{"-warmup", "0 or more"}},
		{"bench", nil, []string{"-window", "-1"}, []string{"-window", "0 or more"}},
		{"bench", nil, []string{"-topics", "0"}, []string{"-topics", "1 or more"}},
		{"bench", nil, []string{"-mode", "ws", "-topics", "3"}, []string{"-topics", "only with -mode bus"}},
		{"bench", nil, []string{"-mode", "ws", "-warmup", "10"}, []string{"-warmup", "only with -mode bus"}},
		{"bench", nil, []string{"-store", "redis"}, []string{"-store", `"redis" has no scheme`, "sqlite:PATH", "postgres://", "mongodb://"}},
		{"bench", nil, []string{"-mode", "fast"}, []string{"-mode", "bus, fanout, ws"}},
		{"bench", nil, []string{"-mode", "fanout"}, []string{"-rate", "above 0 with -mode fanout"}},
		{"bench", nil, []string{"-mode", "fanout", "-rate", "10", "-duration", "0s"}, []string{"-duration", "above 0"}},
		{"bench", nil, []string{"-group-per-conn"}, []string{"-group-per-conn", "only with -mode fanout"}},
		{"bench", nil, []string{"-store", "mongo"}, []string{"-store", `"mongo" names a database`, "mongodb://"}},
		{"bench", nil, []string{"-store", "sqlite:/nonexistent/bench.db"}, []string{"-store", "directory /nonexistent does not exist"}},
		{"bench", nil, []string{"-sqlite-dir", "/nonexistent"}, []string{"-sqlite-dir", "not defined"}},
		{"bench", nil, []string{"-maxinflight", "5"}, []string{"-maxinflight", "not defined"}},
		{"bench", nil, []string{"-n", "10", "100"}, []string{`unexpected argument "100"`}},
	} {
		bin := filepath.Join(dir, tt.prog)
		code, stdout, stderr := runProgram(t, bin, env(tt.env...), tt.args...)
		name := tt.prog + " " + strings.Join(append(tt.env, tt.args...), " ")
		if code != 2 {
			t.Errorf("%s: exit status %d, want 2 (stderr %q)", name, code, stderr)
		}
		if stdout != "" {
			t.Errorf("%s: printed %q on stdout, want nothing", name, stdout)
		}
		line, rest, _ := strings.Cut(stderr, "\n")
		if rest != "" {
			t.Errorf("%s: stderr has more than one line: %q", name, stderr)
		}
		if !strings.HasPrefix(line, tt.prog+": ") {
			t.Errorf("%s: stderr %q does not start with %q", name, line, tt.prog+": ")
		}
		for _, w := range tt.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: stderr %q does not say %q", name, line, w)
			}
		}
	}
}

var (
	// flagLine is a flag in flag.PrintDefaults' listing.
	flagLine = regexp.MustCompile(`^  -(\S+)`)
	kebab    = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
)

// TestHelp: each program's -h says what it does, its flags with their
// defaults, its environment variables and an example command line, and
// exits with 0.
func TestHelp(t *testing.T) {
	dir := buildPrograms(t)
	for _, tt := range []struct {
		prog string
		want []string
	}{
		{"process", []string{"heartbeat -> process.state projector", "-interval duration", "(default 500ms)", "-stale-after", "-for",
			"Environment: none", "go run ./examples/process -interval"}},
		{"hub", []string{"event hub", "-addr string", "(default \"127.0.0.1:8080\")", "-max-inflight", "-shutdown-timeout", "-trusted-proxies", "-tls-cert", "-tls-key",
			"HUB_ADDR", "WS_TOKEN", "JWT_SECRET", "JWT_JWKS_URL", "JWT_AUD", "JWT_ISS", "JWT_LEEWAY", "MONGO_URL", "MONGO_DB",
			"-store", "sqlite:PATH", "postgres://", "mongodb://", "promlib.db", "PG_SCHEMA",
			"Examples:", "hub -demo"}},
		{"bench", []string{"Measures promlib end to end", "-max-inflight int", "(default 1000)", "-store", "sqlite:PATH", "postgres://", "mongodb://", "PG_URL",
			"MONGO_URL", "Examples:", "go run ./examples/bench -store memory"}},
	} {
		code, stdout, stderr := runProgram(t, filepath.Join(dir, tt.prog), env(), "-h")
		if code != 0 {
			t.Errorf("%s -h: exit status %d, want 0", tt.prog, code)
		}
		help := stdout + stderr
		if !strings.HasPrefix(help, "usage: "+tt.prog) {
			t.Errorf("%s -h starts with %q, want a usage line", tt.prog, help[:min(len(help), 40)])
		}
		for _, w := range tt.want {
			if !strings.Contains(help, w) {
				t.Errorf("%s -h does not say %q:\n%s", tt.prog, w, help)
			}
		}
		flags := 0
		for _, line := range strings.Split(help, "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			flags++
			if !kebab.MatchString(m[1]) {
				t.Errorf("%s -%s: flag names are kebab-case (-max-inflight)", tt.prog, m[1])
			}
		}
		if flags < 3 {
			t.Errorf("%s -h lists %d flags", tt.prog, flags)
		}
	}
}

// TestBenchRuns runs the bench as make bench does, on few events: each
// mode prints one JSON line that says what ran (the window a pipelined
// publisher kept in flight, the library's default unless -window is
// given), and loses or duplicates nothing; so does the fan-out, small.
func TestBenchRuns(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(buildPrograms(t), "bench")
	for _, tt := range []struct {
		args   []string
		window int // 0: none (synchronous)
	}{
		{[]string{"-n", "3000"}, event.DefaultMaxPendingInProcess},
		{[]string{"-n", "3000", "-window", "40", "-groups", "2", "-publishers", "3"}, 40},
		{[]string{"-n", "500", "-sync"}, 0},
		{[]string{"-n", "3000", "-rate", "100000"}, event.DefaultMaxPendingInProcess},
		{[]string{"-mode", "ws", "-n", "500"}, wsclient.DefaultPublishWindow},
	} {
		code, stdout, stderr := runProgram(t, bin, env(), tt.args...)
		require.Zero(t, code, "%q: %s", tt.args, stderr)
		var r struct {
			Publish     string  `json:"publish"`
			Window      int     `json:"window"`
			N           int     `json:"n"`
			DeliverPerS float64 `json:"deliver_per_s"`
			P99Ms       float64 `json:"p99_ms"`
			Lost        *int    `json:"lost"`
			Duplicates  *int    `json:"duplicates"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &r), "%q: one JSON line: %s", tt.args, stdout)
		assert.Equal(t, tt.window, r.Window, "%q", tt.args)
		assert.Equal(t, map[bool]string{true: "pipelined", false: "sync"}[tt.window > 0], r.Publish, "%q", tt.args)
		require.NotNil(t, r.Lost, "%q: lost is reported", tt.args)
		require.NotNil(t, r.Duplicates, "%q: duplicates are reported", tt.args)
		assert.Zero(t, *r.Lost, "%q", tt.args)
		assert.Zero(t, *r.Duplicates, "%q", tt.args)
		assert.Positive(t, r.DeliverPerS, "%q", tt.args)
		assert.Positive(t, r.P99Ms, "%q", tt.args)
	}

	// The fan-out, small: 20 connections, 20 events/s for a second, live
	// and with a consumer group per connection; every connection gets
	// every event once.
	for _, sub := range []string{"live", "group-per-conn"} {
		args := []string{"-mode", "fanout", "-conns", "20", "-rate", "20", "-duration", "1s"}
		if sub == "group-per-conn" {
			args = append(args, "-group-per-conn")
		}
		code, stdout, stderr := runProgram(t, bin, env(), args...)
		require.Zero(t, code, "%q: %s", args, stderr)
		var r struct {
			Publish      string  `json:"publish"`
			N            int     `json:"n"`
			Conns        int     `json:"conns"`
			Subscription string  `json:"subscription"`
			P99Ms        float64 `json:"p99_ms"`
			MaxMs        float64 `json:"max_ms"`
			Lost         *int    `json:"lost"`
			Duplicates   *int    `json:"duplicates"`
			Disconnected *int    `json:"disconnected"`
			HubRSSIdleMB float64 `json:"hub_rss_idle_mb"`
			HubCPUS      float64 `json:"hub_cpu_s"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &r), "%q: one JSON line: %s", args, stdout)
		assert.Equal(t, "paced", r.Publish, "%q", args)
		assert.Equal(t, sub, r.Subscription, "%q", args)
		assert.Equal(t, 20, r.N, "%q: events published", args)
		assert.Equal(t, 20, r.Conns, "%q", args)
		require.NotNil(t, r.Lost, "%q: lost is reported", args)
		require.NotNil(t, r.Duplicates, "%q: duplicates are reported", args)
		require.NotNil(t, r.Disconnected, "%q: disconnected is reported", args)
		assert.Zero(t, *r.Lost, "%q", args)
		assert.Zero(t, *r.Duplicates, "%q", args)
		assert.Zero(t, *r.Disconnected, "%q", args)
		assert.Positive(t, r.P99Ms, "%q", args)
		assert.GreaterOrEqual(t, r.MaxMs, r.P99Ms, "%q", args)
		assert.Positive(t, r.HubRSSIdleMB, "%q", args)
		assert.Positive(t, r.HubCPUS, "%q", args)
	}
}
