package ops

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
)

// ErrReadOnly is returned by every write of a Handler whose
// Config.ReadOnly is set (403 read_only).
var ErrReadOnly = errors.New("ops: admin actions are turned off")

// Error codes of writes.
const (
	CodeConflict = "conflict"  // a write the group's live members forbid (event.ErrGroupActive, 409)
	CodeReadOnly = "read_only" // admin actions are off (403)
)

// actionMetric counts the writes.
type actionMetric struct{ c *prometheus.CounterVec }

func newActionMetric(reg prometheus.Registerer) (actionMetric, error) {
	if reg == nil {
		return actionMetric{}, nil
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "promlib", Subsystem: "ops", Name: "actions_total",
		Help: "Admin actions (redrive, purge, cursor reset, group delete, schema register) by action and result (ok, error).",
	}, []string{"action", "result"})
	if err := reg.Register(c); err != nil {
		return actionMetric{}, fmt.Errorf("ops: register metrics: %w", err)
	}
	return actionMetric{c: c}, nil
}

// audit logs a write with its principal and counts it.
func (h *Handler) audit(r *http.Request, action, topic, group string, err error, attrs ...any) {
	principal := ""
	if p, ok := auth.PrincipalFromContext(r.Context()); ok {
		principal = p.Subject
	}
	result := "ok"
	args := append([]any{"action", action, "principal", principal, "remote", r.RemoteAddr, "topic", topic, "group", group}, attrs...)
	if err != nil {
		result = "error"
		args = append(args, "err", err)
		h.cfg.Logger.Warn("ops: admin action failed", args...)
	} else {
		h.cfg.Logger.Info("ops: admin action", args...)
	}
	if h.metric.c != nil {
		h.metric.c.WithLabelValues(action, result).Inc()
	}
}

// cursorEndpoint moves a group ([event.Bus.ResetCursor]). Its to is
// earliest, latest, seq (the group resumes after seq: seq is the new
// cursor, as the dashboard's "after seq" says; it is AtSeq(seq+1) of
// event) or ts (the first record with ts >= ts, Unix ms; "time" is the
// same, the name of earlier releases). A seq past the head is refused.
func (h *Handler) cursorEndpoint(r *http.Request, p params) (any, error) {
	topic, group, err := p.topicAndGroup()
	if err != nil {
		return nil, err
	}
	to := p.str("to")
	if !p.v.Has("to") {
		return nil, invalid("to", "required (earliest, latest, seq or ts)")
	}
	seq, err := p.uint("seq", 0, 0, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	ts, err := p.uint("ts", 0, 0, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	var pos event.Position
	switch to {
	case "earliest":
		pos = event.Earliest()
	case "latest":
		pos = event.Latest()
	case "seq":
		if !p.v.Has("seq") {
			return nil, invalid("seq", "required with to=seq (the group resumes after it)")
		}
		pos = event.AtSeq(seq + 1)
	case "ts", "time":
		if !p.v.Has("ts") {
			return nil, invalid("ts", "required with to=%s (Unix ms)", to)
		}
		pos = event.AtTS(int64(ts))
	default:
		return nil, invalid("to", "%q, want earliest, latest, seq or ts", to)
	}
	force, err := p.bool("force")
	if err != nil {
		return nil, err
	}
	if err := h.ready(r, p, acl.Admin, topic, group); err != nil {
		return nil, err
	}
	ctx := r.Context()
	if to == "seq" {
		head, err := h.bus.Store().Head(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("ops: head of %q: %w", topic, err)
		}
		if seq > head {
			return nil, invalid("seq", "%d is past the head %d of %q", seq, head, topic)
		}
	}
	res, err := h.bus.ResetCursor(ctx, topic, group, pos, force)
	h.audit(r, "cursor_reset", topic, group, err, "to", pos.String(), "seq", res.Seq, "force", force, "members", res.Members)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// DeleteGroupResult is the body of POST /ops/groups/delete.
type DeleteGroupResult struct {
	Topic   string `json:"topic"`
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
}

// deleteGroupEndpoint deletes a group ([event.Bus.DeleteGroup]).
func (h *Handler) deleteGroupEndpoint(r *http.Request, p params) (any, error) {
	topic, group, err := p.topicAndGroup()
	if err != nil {
		return nil, err
	}
	force, err := p.bool("force")
	if err != nil {
		return nil, err
	}
	if err := h.ready(r, p, acl.Admin, topic, group); err != nil {
		return nil, err
	}
	err = h.bus.DeleteGroup(r.Context(), topic, group, force)
	h.audit(r, "group_delete", topic, group, err, "force", force)
	if err != nil {
		return nil, err
	}
	return DeleteGroupResult{Topic: topic, Group: group, Deleted: true}, nil
}

// PartitionsResponse is the body of POST /ops/topics/partitions.
type PartitionsResponse struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
}

// addPartitionsEndpoint raises a topic's partition count
// ([event.Bus.AddPartitions]); fewer than it has is refused (400).
func (h *Handler) addPartitionsEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", true)
	if err != nil {
		return nil, err
	}
	n, err := p.uint("partitions", 0, 1, event.MaxPartitions)
	if err != nil {
		return nil, err
	}
	if !p.v.Has("partitions") {
		return nil, invalid("partitions", "required")
	}
	if err := h.ready(r, p, acl.Admin, topic, ""); err != nil {
		return nil, err
	}
	err = h.bus.AddPartitions(r.Context(), topic, int(n))
	h.audit(r, "topic_partitions", topic, "", err, "partitions", n)
	if err != nil {
		return nil, err
	}
	return PartitionsResponse{Topic: topic, Partitions: int(n)}, nil
}

// ready checks that the endpoint read every parameter of p, then the
// principal's policy on action; a write also needs admin actions on.
func (h *Handler) ready(r *http.Request, p params, action acl.Action, topic, group string) error {
	if err := p.done(); err != nil {
		return err
	}
	if err := h.check(r, action, topic, group); err != nil {
		return err
	}
	if action == acl.Admin {
		return h.writable()
	}
	return nil
}

func (h *Handler) writable() error {
	if h.cfg.ReadOnly {
		return ErrReadOnly
	}
	return nil
}

// bool reads parameter name: true or false (absent: false).
func (p params) bool(name string) (bool, error) {
	s := p.str(name)
	if !p.v.Has(name) {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, invalid(name, "%q, want true or false", s)
	}
	return b, nil
}

// EventsResponse is the body of GET /ops/events: recent records of a
// topic, newest first, with a preview of each payload.
type EventsResponse struct {
	Topic  string         `json:"topic"`
	Head   uint64         `json:"head"`
	Events []EventPreview `json:"events"`
	// Next is the seq to pass as before for the next (older) page; 0 when
	// this page reached the start.
	Next uint64 `json:"next,omitempty"`
}

// EventPreview is a record with its payload cut to PreviewBytes.
type EventPreview struct {
	Seq         uint64            `json:"seq"`
	ID          string            `json:"id"`
	TS          int64             `json:"ts"`
	Key         string            `json:"key,omitempty"`
	Partition   int               `json:"partition"`
	Headers     map[string]string `json:"headers,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	// Size is the payload's length in bytes; Preview its start (text, or
	// for a binary payload a note of its type), Truncated whether it was
	// cut.
	Size      int    `json:"size"`
	Preview   string `json:"preview"`
	Truncated bool   `json:"truncated,omitempty"`
}

// PreviewBytes bounds the payload preview of /ops/events.
const PreviewBytes = 256

func preview(r *event.Record) EventPreview {
	e := EventPreview{Seq: r.Seq, ID: r.ID, TS: r.TS, Key: r.Key, Partition: r.Partition, Headers: r.Headers, ContentType: r.ContentType, Size: len(r.Payload)}
	if r.IsBinary() {
		e.Preview = fmt.Sprintf("(%d bytes of %s)", len(r.Payload), r.ContentType)
		return e
	}
	p := r.Payload
	if len(p) > PreviewBytes {
		n := PreviewBytes
		for n > 0 && !utf8.RuneStart(p[n]) {
			n--
		}
		p, e.Truncated = p[:n], true
	}
	e.Preview = string(p)
	return e
}

func (h *Handler) eventsEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", true)
	if err != nil {
		return nil, err
	}
	before, err := p.uint("before", 0, 1, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	limit, err := p.uint("limit", 20, 1, 200)
	if err != nil {
		return nil, err
	}
	if err := h.ready(r, p, acl.Inspect, topic, ""); err != nil {
		return nil, err
	}
	ctx := r.Context()
	st := h.bus.Store()
	head, err := st.Head(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("ops: head of %q: %w", topic, err)
	}
	end := head + 1
	if before != 0 {
		end = min(before, head+1)
	}
	// Records are read oldest first by seq: read the window below end.
	start := end - min(end-1, limit)
	recs, err := st.Read(ctx, topic, start-1, int(end-start))
	if err != nil {
		return nil, fmt.Errorf("ops: read %q: %w", topic, err)
	}
	resp := EventsResponse{Topic: topic, Head: head, Events: make([]EventPreview, 0, len(recs))}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Seq < end {
			resp.Events = append(resp.Events, preview(&recs[i]))
		}
	}
	if start > 1 {
		resp.Next = start
	}
	return resp, nil
}

// ConnectionLister lists the connections of a gateway (ws.Gateway has a
// Connections method; the host adapts it).
type ConnectionLister interface {
	Connections() []Connection
}

// Connection is one client connection of a gateway.
type Connection struct {
	ID         string    `json:"id"`
	Principal  string    `json:"principal"`
	RemoteAddr string    `json:"remote_addr"`
	Since      time.Time `json:"since"`
	AgeMs      int64     `json:"age_ms"`
	// Subscriptions are "topic/group" of each subscription of a group and
	// "topic" of each live subscription.
	Subscriptions []string `json:"subscriptions"`
	// Subs describe the same subscriptions with their kind.
	Subs []Subscription `json:"subs"`
	// QueueDepth counts the frames queued for the client.
	QueueDepth int `json:"queue_depth"`
}

// Subscription is one subscription of a connection.
type Subscription struct {
	// Kind is "group" (a durable consumer group) or "live" (a live
	// subscription: the topic's events from now, nothing stored).
	Kind  string `json:"kind"`
	Topic string `json:"topic"`
	// Group is "" for a live subscription.
	Group string `json:"group,omitempty"`
}

// ConnectionsResponse is the body of GET /ops/connections.
type ConnectionsResponse struct {
	Connections []Connection `json:"connections"`
}

func (h *Handler) connectionsEndpoint(r *http.Request, p params) (any, error) {
	if err := h.ready(r, p, acl.Inspect, "", ""); err != nil {
		return nil, err
	}
	if h.cfg.Connections == nil {
		return nil, fmt.Errorf("%w: no gateway was given (Config.Connections)", ErrNotSupported)
	}
	// A caller sees the subscriptions it may inspect, and only the
	// connections that hold one of them (with a Verifier; without, all).
	show := inspectable(r.Context())
	now := h.cfg.Clock.Now()
	resp := ConnectionsResponse{Connections: []Connection{}}
	for _, c := range h.cfg.Connections.Connections() {
		subs := []string{}
		for _, s := range c.Subscriptions {
			topic, group, _ := strings.Cut(s, "/")
			if h.cfg.Verifier == nil || show(topic, group) {
				subs = append(subs, s)
			}
		}
		kinds := []Subscription{}
		for _, s := range c.Subs {
			if h.cfg.Verifier == nil || show(s.Topic, s.Group) {
				kinds = append(kinds, s)
			}
		}
		if h.cfg.Verifier != nil && len(subs) == 0 {
			continue
		}
		c.Subscriptions, c.Subs = subs, kinds
		c.AgeMs = max(now.Sub(c.Since).Milliseconds(), 0)
		resp.Connections = append(resp.Connections, c)
	}
	return resp, nil
}

// GroupsResponse is the body of GET /ops/groups: the status of each
// group of a topic.
type GroupsResponse struct {
	Topic  string              `json:"topic"`
	Groups []event.GroupStatus `json:"groups"`
}

func (h *Handler) groupsEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", true)
	if err != nil {
		return nil, err
	}
	if err := h.ready(r, p, acl.Inspect, topic, ""); err != nil {
		return nil, err
	}
	ctx := r.Context()
	gs, err := h.groupStatuses(ctx, topic, inspectable(ctx))
	if err != nil {
		return nil, err
	}
	return GroupsResponse{Topic: topic, Groups: gs}, nil
}

// SettingsResponse is the body of GET /ops/settings: what the dashboard
// needs to know of the Handler's configuration.
type SettingsResponse struct {
	ChartWindowMs   int64    `json:"chart_window_ms"`
	ChartIntervalMs int64    `json:"chart_interval_ms"`
	ChartGroups     []string `json:"chart_groups"`
	ReadOnly        bool     `json:"read_only"`
	PollMs          int      `json:"poll_ms"`
}

func (h *Handler) settingsEndpoint(r *http.Request, p params) (any, error) {
	if err := h.ready(r, p, acl.Inspect, "", ""); err != nil {
		return nil, err
	}
	gs := h.cfg.ChartGroups
	if gs == nil {
		gs = []string{}
	}
	return SettingsResponse{ChartWindowMs: h.cfg.ChartWindow.Milliseconds(), ChartIntervalMs: h.cfg.ChartInterval.Milliseconds(), ChartGroups: gs, ReadOnly: h.cfg.ReadOnly, PollMs: DashboardPollInterval}, nil
}
