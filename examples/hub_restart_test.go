package examples

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
)

// hubProcess is a hub binary running in a test.
type hubProcess struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	logs strings.Builder
	// exited is closed when the process has ended, with err its Wait's.
	exited chan struct{}
	err    error
}

func (h *hubProcess) log() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logs.String()
}

var listening = regexp.MustCompile(`msg="hub listening" addr=(\S+)`)

// startHubProcess runs the hub binary in dir with env and waits until it
// listens; the test's end kills it if it still runs.
func startHubProcess(t *testing.T, bin, dir string, env []string, args ...string) *hubProcess {
	t.Helper()
	h := &hubProcess{cmd: exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...), exited: make(chan struct{})}
	h.cmd.Dir, h.cmd.Env = dir, env
	stderr, err := h.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, h.cmd.Start())
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			h.mu.Lock()
			h.logs.WriteString(sc.Text() + "\n")
			h.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		h.err = h.cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-h.exited:
		default:
			_ = h.cmd.Process.Kill()
			<-h.exited
		}
	})
	select {
	case h.addr = <-addr:
	case <-h.exited:
		t.Fatalf("the hub exited before it listened: %v\n%s", h.err, h.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("the hub did not listen within 30s:\n%s", h.log())
	}
	return h
}

// stop sends sig and waits for the process to end.
func (h *hubProcess) stop(t *testing.T, sig os.Signal) error {
	t.Helper()
	require.NoError(t, h.cmd.Process.Signal(sig))
	select {
	case <-h.exited:
		return h.err
	case <-time.After(30 * time.Second):
		t.Fatalf("the hub did not end within 30s after %v:\n%s", sig, h.log())
		return nil
	}
}

// publishHTTP publishes one event over HTTP and returns its id.
func publishHTTP(t *testing.T, addr, topic, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish/"+topic, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		ID  string `json:"id"`
		Seq uint64 `json:"seq"`
	}
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &out))
	require.NotEmpty(t, out.ID)
	return out.ID
}

// TestHubRestartKeepsEvents runs the hub binary as a user would, with no
// -store and no MONGO_URL: it keeps its events in promlib.db of its
// working directory, so a hub started again there replays and delivers
// every acknowledged event, after a graceful stop (SIGTERM) and after
// kill -9.
func TestHubRestartKeepsEvents(t *testing.T) {
	bin := filepath.Join(buildPrograms(t), "hub")
	work := t.TempDir()
	hubEnv := env("WS_TOKEN=tok")
	const topic = "restart.kept"

	first := startHubProcess(t, bin, work, hubEnv)
	assert.Contains(t, first.log(), "events are kept in a SQLite file (the default without -store or MONGO_URL)")
	assert.Contains(t, first.log(), filepath.Join(work, "promlib.db"), "the log names the file")
	ids := []string{publishHTTP(t, first.addr, topic, `{"n":1}`)}
	require.NoError(t, first.stop(t, syscall.SIGTERM), "graceful stop:\n%s", first.log())
	assert.FileExists(t, filepath.Join(work, "promlib.db"))

	second := startHubProcess(t, bin, work, hubEnv)
	ids = append(ids, publishHTTP(t, second.addr, topic, `{"n":2}`))
	err := second.stop(t, syscall.SIGKILL)
	require.Error(t, err, "killed")
	assert.Contains(t, err.Error(), "killed")

	third := startHubProcess(t, bin, work, hubEnv)
	req, err := http.NewRequest(http.MethodGet, "http://"+third.addr+"/replay?topic="+topic+"&from=earliest", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var replay struct {
		Events []event.Record `json:"events"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&replay))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var replayed []string
	for i, r := range replay.Events {
		replayed = append(replayed, r.ID)
		assert.Equal(t, uint64(i+1), r.Seq)
		assert.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i+1), string(r.Payload))
	}
	assert.Equal(t, ids, replayed, "both events, in order, after a SIGTERM and a kill -9")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := wsclient.Dial(ctx, "ws://"+third.addr+"/ws", &wsclient.Options{Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	got := make(chan string, len(ids))
	_, err = c.Subscribe(ctx, topic, "after-restarts", func(_ context.Context, m *wsclient.Message) error {
		got <- m.ID
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	var delivered []string
	for range ids {
		select {
		case id := <-got:
			delivered = append(delivered, id)
		case <-ctx.Done():
			t.Fatalf("delivered %v of %v", delivered, ids)
		}
	}
	assert.Equal(t, ids, delivered)
	require.NoError(t, c.Close())
	require.NoError(t, third.stop(t, syscall.SIGTERM), "graceful stop:\n%s", third.log())
}
