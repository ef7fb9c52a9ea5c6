package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runMainEnv makes the test binary run the hub's main instead of the
// tests (TestMain), so that a test runs the real program, exit status
// and working directory included, without building it.
const runMainEnv = "PROMLIB_HUB_TEST_RUN_MAIN"

// runMain runs the hub's main with args and env (and nothing else of the
// test's environment that the hub reads) in a fresh working directory,
// and returns its exit status, stdout, stderr and that directory. The hub
// is stopped after a while if it starts: the tests here give it bad
// settings, so it never should.
func runMain(t *testing.T, env []string, args ...string) (code int, stdout, stderr, dir string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	dir = t.TempDir()
	var o, e bytes.Buffer
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &o, &e
	cmd.Env = append([]string{runMainEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("hub %q: %v", args, err)
	}
	require.NoError(t, ctx.Err(), "hub %q started and ran until stopped: %s", args, e.String())
	return code, o.String(), e.String(), dir
}

// TestHubBadSettings runs the hub with each bad flag or variable: it
// exits with status 2 and one line on stderr that names the flag and
// what it allows, before it opens anything: no store file (promlib.db)
// is left in its working directory, nor anything else.
func TestHubBadSettings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  []string
		args []string
		want []string // in the one line of stderr
	}{
		{nil, []string{"-partitions", "-3"}, []string{"-partitions", "1 to 4096"}},
		{nil, []string{"-partitions", "0"}, []string{"-partitions", "1 to 4096"}},
		{nil, []string{"-partitions", "5000"}, []string{"-partitions", "1 to 4096"}},
		{nil, []string{"-ops-chart-window", "48h"}, []string{"-ops-chart-window", "up to 24h"}},
		{nil, []string{"-ops-chart-window", "-1m"}, []string{"-ops-chart-window", "above 0"}},
		{nil, []string{"-ops-chart-interval", "0"}, []string{"-ops-chart-interval", "10ms or more"}},
		{nil, []string{"-ops-chart-interval", "20m"}, []string{"-ops-chart-interval", "longer than -ops-chart-window"}},
		{nil, []string{"-ops-chart-window", "24h", "-ops-chart-interval", "1s"}, []string{"-ops-chart-interval", "more than 20000 points"}},
		{nil, []string{"-ops-chart-groups", "orders"}, []string{"-ops-chart-groups", "topic/group"}},
		{nil, []string{"-ops-chart-groups", "orders/bad group"}, []string{"-ops-chart-groups", "topic/group"}},
		{nil, []string{"-addr", "nonsense"}, []string{"-addr", `"nonsense"`, "host:port"}},
		{nil, []string{"-addr", "127.0.0.1:99999"}, []string{"-addr", "0 to 65535"}},
		{nil, []string{"-addr", "127.0.0.1:nosuchservice"}, []string{"-addr", "0 to 65535"}},
		{[]string{"HUB_ADDR=8080"}, nil, []string{"-addr", `"8080"`}},
		{nil, []string{"-addr", ""}, []string{"-addr", "listen address"}},
		{nil, []string{"-ws-write-timeout", "-1s"}, []string{"-ws-write-timeout", "above 0"}},
		{nil, []string{"-ws-write-timeout", "0"}, []string{"-ws-write-timeout", "above 0"}},
		{nil, []string{"-ack-timeout", "-1s"}, []string{"-ack-timeout", "above 0"}},
		{nil, []string{"-auth-timeout", "0"}, []string{"-auth-timeout", "above 0"}},
		{nil, []string{"-shutdown-timeout", "-1s"}, []string{"-shutdown-timeout", "above 0"}},
		{nil, []string{"-read-timeout", "0"}, []string{"-read-timeout", "above 0"}},
		{nil, []string{"-write-timeout", "-1s"}, []string{"-write-timeout", "above 0"}},
		{nil, []string{"-idle-timeout", "0"}, []string{"-idle-timeout", "above 0"}},
		{nil, []string{"-ping", "0"}, []string{"-ping", "negative one to disable"}},
		{nil, []string{"-max-inflight", "0"}, []string{"-max-inflight", "1 or more"}},
		{nil, []string{"-read-limit", "100"}, []string{"-read-limit", "1024 or more"}},
		{nil, []string{"-send-queue", "0"}, []string{"-send-queue", "1 or more"}},
		{nil, []string{"-publish-rate", "-1"}, []string{"-publish-rate", "0 (no limit)"}},
		{nil, []string{"-topic-rate", "+Inf"}, []string{"-topic-rate", "finite"}},
		{nil, []string{"-max-failed-auth", "0"}, []string{"-max-failed-auth", "1 or more"}},
		{nil, []string{"-failed-auth-rate", "-2"}, []string{"-failed-auth-rate", "above 0"}},
		{nil, []string{"-failed-auth-burst", "0"}, []string{"-failed-auth-burst", "1 or more"}},
		{nil, []string{"-trusted-proxies", "10.0.0.0/33"}, []string{"-trusted-proxies"}},
		{nil, []string{"-origins", "app.example.com,a["}, []string{"-origins", `"a["`}},
		{nil, []string{"-allowed-hosts", "hub.internal:8080"}, []string{"-allowed-hosts", "without scheme or port"}},
		{nil, []string{"-allowed-hosts", "http://hub.internal"}, []string{"-allowed-hosts", "without scheme or port"}},
		{nil, []string{"-log", "verbose"}, []string{"-log", "debug, info, warn or error"}},
		{nil, []string{"-jwt-leeway", "-1s"}, []string{"-jwt-leeway", "0 or more"}},
		{nil, []string{"-tls-key", "key.pem"}, []string{"-tls-cert and -tls-key", "both"}},
		{nil, []string{"-tls-cert", "nofile.pem", "-tls-key", "nofile.key"}, []string{"-tls-cert nofile.pem", "no such file"}},
		{nil, []string{"-partitions", "many"}, []string{"-partitions", `"many"`}},
		{nil, []string{"-nosuchflag"}, []string{"nosuchflag", "-h"}},
		{nil, []string{"-demo", "now"}, []string{`unexpected argument "now"`}},
		{[]string{"JWT_LEEWAY=soon"}, nil, []string{"JWT_LEEWAY"}},
		{[]string{"WS_TOKEN=a", "JWT_SECRET=" + strings.Repeat("k", 32)}, nil, []string{"WS_TOKEN", "JWT_SECRET", "not both"}},
		{[]string{"JWT_SECRET=short"}, nil, []string{"JWT_SECRET", "at least 32"}},
		{[]string{"JWT_AUD=api"}, nil, []string{"JWT_SECRET or JWT_JWKS_URL"}},
	} {
		name := strings.Join(append(append([]string{}, tt.env...), tt.args...), " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr, dir := runMain(t, tt.env, tt.args...)
			assert.Equal(t, 2, code, "exit status; stderr %q", stderr)
			assert.Empty(t, stdout)
			line, rest, _ := strings.Cut(stderr, "\n")
			assert.Empty(t, rest, "one line on stderr")
			assert.True(t, strings.HasPrefix(line, "hub: "), "%q starts with %q", line, "hub: ")
			assert.NotContains(t, line, "ops: ops:")
			for _, w := range tt.want {
				assert.Contains(t, line, w)
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "the hub left files in its working directory (%s would be the store)", defaultSQLiteFile)
		})
	}
}

// A listen address in use is no bad flag, but the hub still finds out
// before it creates its store file: exit status 1, no promlib.db.
func TestHubAddrInUseCreatesNoStore(t *testing.T) {
	t.Parallel()
	addr, _ := startHub(t, nil)
	code, _, stderr, dir := runMain(t, nil, "-addr", addr)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "-addr "+addr)
	assert.Contains(t, stderr, "address already in use")
	_, err := os.Stat(dir + string(os.PathSeparator) + defaultSQLiteFile)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
