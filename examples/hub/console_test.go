package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
)

// artifactsDir is where the browser tests save their screenshots:
// TEST_ARTIFACTS, or .ci/artifacts/ at the top of the repository (git
// ignores it).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".ci", "artifacts", "ops-console")
	}
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(abs, 0o755))
	return abs
}

type received struct {
	mu   sync.Mutex
	msgs []*wsclient.Message
}

func (r *received) add(m *wsclient.Message) { r.mu.Lock(); r.msgs = append(r.msgs, m); r.mu.Unlock() }
func (r *received) all() []*wsclient.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*wsclient.Message(nil), r.msgs...)
}

// The operator's console in a browser: an event that one group fails
// reaches that group's DLQ, a click on Redrive delivers it again to that
// group only; every page is captured at desktop width and at 375 px, where
// nothing scrolls sideways.
func TestHubOpsConsoleInBrowser(t *testing.T) {
	chromium := requireTool(t, "chromium", "chromium-browser", "google-chrome")
	// The hub samples the charts every 200ms over a window of 8s: the
	// charts fill in a few seconds.
	addr, _, stop := runHub(t, map[string]string{"WS_TOKEN": "tok"}, "-ops-chart-interval", "200ms", "-ops-chart-window", "8s")
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	c, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	var billing, audit received
	_, err = c.Subscribe(ctx, "shop.orders", "billing", func(_ context.Context, m *wsclient.Message) error {
		billing.add(m)
		if m.Headers[event.HeaderRedriveID] == "" {
			return assert.AnError // fail the first delivery: straight to the DLQ
		}
		return nil
	}, event.WithMaxAttempts(1))
	require.NoError(t, err)
	_, err = c.Subscribe(ctx, "shop.orders", "audit", func(_ context.Context, m *wsclient.Message) error {
		audit.add(m)
		return nil
	})
	require.NoError(t, err)
	publishOK(t, addr, "shop.orders")
	publishOK(t, addr, "shop.audit")

	page := openPage(t, ctx, chromium, "http://"+addr+"/ops/#token=tok")
	eval := func(expr string) string {
		v, err := page.eval(ctx, expr)
		require.NoError(t, err)
		return v
	}
	waitFor := func(expr, what string) {
		require.Eventually(t, func() bool { return eval(expr) == "true" }, 30*time.Second, 100*time.Millisecond, what)
	}
	waitFor(`!!document.querySelector('#topics-body tr[data-topic="shop.orders"]')`, "the overview lists the topic")
	waitFor(`document.querySelectorAll('#rate-charts [data-chart]').length >= 2`, "a rate chart per topic")
	// The history is the hub's: a reload shows at its first poll the
	// points the page had before it.
	waitFor(`Number(document.body.dataset.chartPoints) >= 6`, "rate points from the hub")
	before, err := strconv.Atoi(eval(`document.body.dataset.chartPoints`))
	require.NoError(t, err)
	eval(`window.beforeReload = true; location.reload()`)
	waitFor(`!window.beforeReload && document.body.dataset.polls === "1"`, "the reloaded page's first poll")
	after, err := strconv.Atoi(eval(`document.body.dataset.chartPoints`))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after, before, "the reloaded page lost the charts' history")
	waitFor(`document.querySelectorAll('#rate-charts polyline.pub[points*=" "]').length >= 1`, "a drawn rate line")

	// The group page shows the dead letter; Redrive sends it back.
	eval(`location.hash = "#/group/shop.orders/billing"`)
	waitFor(`document.querySelectorAll('#dlq-body tr').length === 1`, "billing's DLQ holds the failed event")
	waitFor(`!!document.querySelector('#partitions-body tr')`, "the partitions are listed")
	dir := artifactsDir(t)
	shots := map[string]string{
		"overview":    "#/",
		"topic":       "#/topic/shop.orders",
		"group":       "#/group/shop.orders/billing",
		"connections": "#/connections",
	}
	capture := func(name, suffix string) {
		png, err := page.screenshot(ctx)
		require.NoError(t, err)
		path := filepath.Join(dir, "ops-"+name+suffix+".png")
		require.NoError(t, os.WriteFile(path, png, 0o644))
		t.Logf("screenshot: %s", path)
	}
	capture("group", "")

	// With no dead letter ticked, Redrive would take the whole DLQ: it
	// asks first, naming how many, and a cancel redrives nothing.
	shown := func(id string) string { return `document.getElementById('` + id + `').getClientRects().length > 0` }
	waitFor(`!(`+shown("dlq-confirm")+`) && !(`+shown("cursor-confirm")+`)`, "no confirmation shown yet")
	eval(`document.getElementById('dlq-redrive').click()`)
	waitFor(shown("dlq-confirm"), "the redrive of all asks for a confirmation")
	assert.Contains(t, eval(`document.getElementById('dlq-confirm-text').textContent`), "all 1 dead letter of billing on shop.orders")
	assert.Equal(t, "Redrive all 1", eval(`document.getElementById('dlq-confirm-yes').textContent`))
	eval(`document.getElementById('dlq-confirm').scrollIntoView()`)
	capture("group-confirm", "")
	eval(`document.getElementById('dlq-confirm-no').click()`)
	waitFor(`!(`+shown("dlq-confirm")+`)`, "the cancel hides the confirmation")
	polls := eval(`document.body.dataset.polls`)
	waitFor(`Number(document.body.dataset.polls) >= `+polls+` + 2`, "two polls after the cancel")
	assert.Equal(t, "1", eval(`String(document.querySelectorAll('#dlq-body tr').length)`), "the cancel left the DLQ as it was")
	assert.Equal(t, "undefined", eval(`String(document.body.dataset.lastAction)`), "the cancel sent no action")
	assert.Len(t, billing.all(), 1, "the cancel redrove nothing")

	eval(`document.getElementById('dlq-redrive').click()`)
	waitFor(shown("dlq-confirm"), "the confirmation again")
	eval(`document.getElementById('dlq-confirm-yes').click()`)
	waitFor(`document.body.dataset.lastAction === "dlq/redrive"`, "the redrive was answered")
	require.Eventually(t, func() bool { return len(billing.all()) == 2 }, 30*time.Second, 50*time.Millisecond,
		"billing gets the event again")
	msgs := billing.all()
	assert.Equal(t, msgs[0].ID, msgs[1].ID, "the redrive is the original event")
	assert.Equal(t, "shop.orders", msgs[1].Topic)
	waitFor(`document.querySelectorAll('#dlq-body tr').length === 0`, "the DLQ is empty")
	// audit acked the event the first time and never sees it again: one
	// more publish shows that it is alive and counts on.
	publishOK(t, addr, "shop.orders")
	require.Eventually(t, func() bool { return len(audit.all()) == 2 }, 30*time.Second, 50*time.Millisecond)
	assert.Len(t, audit.all(), 2)
	for _, m := range audit.all() {
		assert.Empty(t, m.Headers[event.HeaderRedriveID])
	}

	// The cursor reset asks for a confirmation first.
	eval(`document.getElementById('cursor-reset').click()`)
	waitFor(shown("cursor-confirm"), "a confirmation is shown")
	eval(`document.getElementById('cursor-confirm-no').click()`)
	waitFor(`!(`+shown("cursor-confirm")+`)`, "the cancel hides it")

	// Some traffic over a few samples, for the charts of the screenshots.
	eval(`location.hash = "#/"`)
	for round := range 8 {
		for range round%3*2 + 1 {
			publishOK(t, addr, "shop.orders")
		}
		publishOK(t, addr, "shop.audit")
		// The newest sample's time, not the count of points, which stops
		// growing once the window is full.
		last := eval(`document.body.dataset.chartLast`)
		waitFor(`document.body.dataset.chartLast !== "`+last+`"`, "a new sample")
	}

	// The client's ack of the redriven event (by its original topic and
	// id) settled it: billing has nothing left on its redrive topic.
	waitFor(`(document.querySelector('#groups-body tr[data-topic="shop.orders.redrive.billing"][data-group="billing"] td[data-field="lag"]') || {}).textContent === "0"`,
		"the redriven event acked over the WebSocket")

	ready := map[string]string{
		"overview":    `document.querySelectorAll('#groups-body tr').length >= 2`,
		"topic":       `document.querySelectorAll('#events-body tr').length >= 2`,
		"group":       `!!document.querySelector('#partitions-body tr')`,
		"connections": `document.querySelectorAll('#connections-body tr').length >= 1`,
	}
	for _, name := range []string{"overview", "topic", "group", "connections"} {
		eval(`location.hash = "` + shots[name] + `"`)
		waitFor(`document.body.dataset.page === "`+name+`"`, name)
		waitFor(ready[name], name+" shows its data")
		// A view shown again holds its last data until a poll that began
		// after the switch: wait for two.
		polls := eval(`document.body.dataset.polls`)
		waitFor(`Number(document.body.dataset.polls) >= `+polls+` + 2`, "a poll of "+name)
		capture(name, "")
	}
	var none struct{}
	require.NoError(t, page.call(ctx, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 375, "height": 800, "deviceScaleFactor": 1, "mobile": true}, &none))
	for _, name := range []string{"overview", "topic", "group", "connections"} {
		eval(`location.hash = "` + shots[name] + `"`)
		waitFor(`document.body.dataset.page === "`+name+`"`, name)
		waitFor(ready[name], name+" shows its data at 375 px")
		polls := eval(`document.body.dataset.polls`)
		waitFor(`document.body.dataset.polls !== "`+polls+`"`, "a poll at 375 px")
		w, err := strconv.Atoi(eval(`String(document.documentElement.scrollWidth)`))
		require.NoError(t, err)
		assert.LessOrEqual(t, w, 375, "%s scrolls sideways at 375 px", name)
		capture(name, "-375")
	}
	t.Logf("screenshots in %s", dir)
}
