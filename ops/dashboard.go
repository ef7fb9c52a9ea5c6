package ops

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
)

// The dashboard is one page with its style and script inline: no build
// step, no external assets. The parts are kept in files of their own for
// editing and joined once.
var (
	//go:embed dashboard.html
	dashboardHTML string
	//go:embed dashboard.css
	dashboardCSS string
	//go:embed dashboard.js
	dashboardJS string
)

// Element ids of the dashboard page; DashboardStatusID is for tests that
// drive it in a browser. The page also marks rows and cells with data attributes: each topic row
// of #topics-body is tr[data-topic] with cells td[data-field] events, head,
// groups, in_flight, lag (the largest of its groups) and dlq_pending; each
// group row of #groups-body is tr[data-topic][data-group] with cells
// td[data-field] committed, lag, lag_ms, members, in_flight, waiting,
// buffered and subscribers. The body's data-state is "loading", "ok" or
// "error", data-polls counts the polls that succeeded, data-chart-points
// the publish-rate points the page holds (loaded from /ops/charts, which
// the hub keeps: a reload shows them again), data-page names the
// view shown (overview, topic, group, connections) and data-last-action
// the last write that succeeded. The views' tables are #events-body,
// #partitions-body, #deliveries-body (this process's unsettled records), #dlq-body (a row per dead letter, with a checkbox) and
// #connections-body; the writes are the buttons #dlq-redrive, #dlq-purge,
// #cursor-reset and, in the confirmation, #cursor-confirm-yes.
const (
	DashboardStatusID   = "ops-status"     // "ok", or the error of the last poll
	dashboardUpdatedID  = "ops-updated"    // the server time of the last poll
	dashboardTokenID    = "ops-token"      // a bearer token to send, kept in sessionStorage
	dashboardTopicsID   = "topics-body"    // tbody of the topics table
	dashboardGroupsID   = "groups-body"    // tbody of the groups table
	dashboardInflightID = "inflight-total" // deliveries in flight in this Bus
)

// DashboardPollInterval is how often the page polls, in milliseconds.
const DashboardPollInterval = 1000

type dashboardPage struct {
	body []byte
	csp  string
}

func newDashboardPage() dashboardPage {
	page := strings.Replace(dashboardHTML, "{{style}}", dashboardCSS, 1)
	page = strings.Replace(page, "{{script}}", dashboardJS, 1)
	return dashboardPage{
		body: []byte(page),
		// Only the page's own inline style and script, by hash; fetches
		// only to this origin.
		csp: "default-src 'none'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
			"style-src " + hashSource(dashboardCSS) + "; script-src " + hashSource(dashboardJS),
	}
}

func hashSource(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

func (p dashboardPage) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(p.body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", p.csp)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(p.body)
	}
}
