package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
)

// requireTool finds an external program a test needs; without it the test
// is skipped, except under CI=true, where .ci/run installs it.
func requireTool(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found: .ci/run installs it", names[0])
	}
	t.Skipf("%s not installed", names[0])
	return ""
}

// publishOK publishes over HTTP with the static token.
func publishOK(t *testing.T, addr, topic string) {
	t.Helper()
	code, body := httpPublish(t, addr, topic, "tok")
	require.Equal(t, http.StatusOK, code, "%v", body)
}

func scrape(t *testing.T, addr string) (string, map[string]float64) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err, "the exposition parses")
	sums := make(map[string]float64)
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.Counter != nil:
				sums[name] += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sums[name] += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sums[name] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return string(body), sums
}

// The hub's /metrics passes promtool after traffic, and its counters move
// as events flow.
func TestHubMetrics(t *testing.T) {
	addr, _ := startHub(t, map[string]string{"WS_TOKEN": "tok"})
	ctx := context.Background()
	c, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	acked := make(chan struct{}, 100)
	_, err = c.Subscribe(ctx, "metrics.test", "g", func(ctx context.Context, m *wsclient.Message) error {
		acked <- struct{}{}
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	_, before := scrape(t, addr)
	for range 5 {
		publishOK(t, addr, "metrics.test")
	}
	for range 5 {
		<-acked
	}
	var body string
	var after map[string]float64
	require.Eventually(t, func() bool {
		body, after = scrape(t, addr)
		return after["promlib_events_acked_total"]-before["promlib_events_acked_total"] == 5
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, 5.0, after["promlib_events_published_total"]-before["promlib_events_published_total"])
	assert.Equal(t, 5.0, after["promlib_events_delivered_total"]-before["promlib_events_delivered_total"])
	assert.Positive(t, after["promlib_ws_connections"])
	assert.Positive(t, after["promlib_delivery_latency_seconds"])

	promtool := requireTool(t, "promtool")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "promtool reports no problem")
}

// The ops dashboard, loaded in headless Chromium, shows a topic's lag and
// follows it as events are published. A screenshot goes to TEST_ARTIFACTS
// (or the test's temporary directory).
func TestHubDashboardInBrowser(t *testing.T) {
	chromium := requireTool(t, "chromium", "chromium-browser", "google-chrome")
	addr, _ := startHub(t, map[string]string{"WS_TOKEN": "tok"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A paused consumer, so the lag grows with every publish.
	c, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.Subscribe(ctx, "dash.orders", "billing", func(context.Context, *wsclient.Message) error { return nil })
	require.NoError(t, err)
	require.NoError(t, sub.Pause(ctx))
	for range 3 {
		publishOK(t, addr, "dash.orders")
	}

	page := openPage(t, ctx, chromium, "http://"+addr+"/ops/#token=tok")
	lag := func() string {
		v, err := page.eval(ctx, `(function(){
			var c = document.querySelector('tr[data-topic="dash.orders"][data-group="billing"] td[data-field="lag"]');
			return c ? c.textContent.trim() : "";
		})()`)
		require.NoError(t, err)
		return v
	}
	require.Eventually(t, func() bool { return lag() == "3" }, 20*time.Second, 100*time.Millisecond,
		"the dashboard shows the topic with lag 3 (shows %q)", lag())
	for range 4 {
		publishOK(t, addr, "dash.orders")
	}
	require.Eventually(t, func() bool { return lag() == "7" }, 20*time.Second, 100*time.Millisecond,
		"the lag follows the publishes (shows %q)", lag())
	state, err := page.eval(ctx, `document.body.dataset.state`)
	require.NoError(t, err)
	assert.Equal(t, "ok", state)

	png, err := page.screenshot(ctx)
	require.NoError(t, err)
	dir := os.Getenv("TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "ops-dashboard.png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
}

// cdpPage is a page of a headless Chromium, driven over the DevTools
// protocol: just enough of it for a test.
type cdpPage struct {
	conn *websocket.Conn
	id   int
}

// openPage starts Chromium on a free debugging port, opens url and returns
// the page; the browser is stopped when the test ends.
func openPage(t *testing.T, ctx context.Context, chromium, url string) *cdpPage {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	profile, err := os.MkdirTemp("", "promlib-chromium-")
	require.NoError(t, err)
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+profile, "--remote-debugging-address=127.0.0.1",
		"--remote-debugging-port="+strconv.Itoa(port), "--window-size=1200,800", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its helpers go with it
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = os.RemoveAll(profile)
	})

	var target struct {
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	require.Eventually(t, func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, fmt.Sprintf("http://127.0.0.1:%d/json/new?about:blank", port), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&target) == nil && target.WebSocketDebuggerURL != ""
	}, 30*time.Second, 100*time.Millisecond, "Chromium's DevTools endpoint")
	conn, _, err := websocket.Dial(ctx, target.WebSocketDebuggerURL, nil)
	require.NoError(t, err)
	conn.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = conn.CloseNow() })
	p := &cdpPage{conn: conn}
	// Navigate rather than open the URL: a fragment (#token=...) would not
	// survive the DevTools HTTP endpoint.
	var nav struct{}
	require.NoError(t, p.call(ctx, "Page.navigate", map[string]any{"url": url}, &nav))
	return p
}

// call sends one DevTools command and returns its result, skipping events.
func (p *cdpPage) call(ctx context.Context, method string, params any, result any) error {
	p.id++
	msg, _ := json.Marshal(map[string]any{"id": p.id, "method": method, "params": params})
	if err := p.conn.Write(ctx, websocket.MessageText, msg); err != nil {
		return err
	}
	for {
		_, data, err := p.conn.Read(ctx)
		if err != nil {
			return err
		}
		var resp struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &resp); err != nil || resp.ID != p.id {
			continue
		}
		if resp.Error != nil {
			return fmt.Errorf("%s: %s", method, resp.Error.Message)
		}
		return json.Unmarshal(resp.Result, result)
	}
}

func (p *cdpPage) eval(ctx context.Context, expr string) (string, error) {
	var res struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
	}
	err := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &res)
	if err != nil {
		return "", err
	}
	if res.Result.Value == nil {
		return "", nil
	}
	return fmt.Sprint(res.Result.Value), nil
}

func (p *cdpPage) screenshot(ctx context.Context) ([]byte, error) {
	var res struct {
		Data string `json:"data"`
	}
	if err := p.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &res); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(res.Data)
}

// Replay, export, latest and ops take the hub's tokens.
func TestHubHTTPEndpointsAuth(t *testing.T) {
	addr, _ := startHub(t, map[string]string{"WS_TOKEN": "tok"})
	publishOK(t, addr, "audit.log")
	for _, path := range []string{"/replay?topic=audit.log&from=earliest", "/export?topic=audit.log", "/latest?topic=audit.log", "/ops/topics", "/ops/cursors?topic=audit.log"} {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s without a token", path)

		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	}
}
