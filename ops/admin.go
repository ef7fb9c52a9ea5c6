package ops

import (
	"context"
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

// ErrConflict is returned by a write that the state of a group forbids,
// such as a cursor reset while the group has live members (409).
var ErrConflict = errors.New("ops: conflict")

// ErrReadOnly is returned by every write of a Handler whose
// Config.ReadOnly is set (403 read_only).
var ErrReadOnly = errors.New("ops: admin actions are turned off")

// Error codes of writes.
const (
	CodeConflict = "conflict"  // a write the group's state forbids (409)
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

// liveMembers returns the live members of group on topic: those the store
// lists (every process) and, without a Lister, whether it has
// subscribers in this Bus.
func (h *Handler) liveMembers(ctx context.Context, topic, group string) ([]string, error) {
	var ms []string
	if h.cfg.Lister != nil {
		gs, err := h.cfg.Lister.ListGroups(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("ops: list groups of %q: %w", topic, err)
		}
		for _, g := range gs {
			if g.Group == group {
				ms = g.Members
			}
		}
	}
	if _, ok := h.stats()[[2]string{topic, group}]; ok && len(ms) == 0 {
		ms = []string{"(this process)"}
	}
	return ms, nil
}

// CursorResult is the body of POST /ops/cursor.
type CursorResult struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// Seq is the cursor now: the group resumes after it.
	Seq uint64 `json:"seq"`
}

// ResetCursor moves the cursor of group on topic to: "earliest" (the whole
// topic again), "latest" (skip everything stored), "seq" (resume after
// seq) or "time" (resume at the first record with ts >= ms). It is
// refused ([ErrConflict]) while the group has live members unless force
// is set; with force, members in other processes keep what they hold
// and may commit over the reset.
func (h *Handler) ResetCursor(ctx context.Context, topic, group, to string, seq uint64, ms int64, force bool) (CursorResult, error) {
	st := h.bus.Store()
	head, err := st.Head(ctx, topic)
	if err != nil {
		return CursorResult{}, fmt.Errorf("ops: head of %q: %w", topic, err)
	}
	var target uint64
	switch to {
	case "earliest":
		if pr, ok := st.(event.Pruner); ok {
			f, err := pr.Floor(ctx, topic)
			if err != nil {
				return CursorResult{}, fmt.Errorf("ops: floor of %q: %w", topic, err)
			}
			target = f - min(f, 1)
		}
	case "latest":
		target = head
	case "seq":
		if seq > head {
			return CursorResult{}, invalid("seq", "%d is past the head %d of %q", seq, head, topic)
		}
		target = seq
	case "time":
		first, ok, err := st.FirstSeqAtOrAfter(ctx, topic, ms)
		if err != nil {
			return CursorResult{}, fmt.Errorf("ops: find ts %d in %q: %w", ms, topic, err)
		}
		target = head
		if ok {
			target = first - 1
		}
	default:
		return CursorResult{}, invalid("to", "%q, want earliest, latest, seq or time", to)
	}
	if !force {
		ms, err := h.liveMembers(ctx, topic, group)
		if err != nil {
			return CursorResult{}, err
		}
		if len(ms) > 0 {
			return CursorResult{}, fmt.Errorf("%w: group %q on %q has live members %v: stop them, or pass force", ErrConflict, group, topic, ms)
		}
	}
	if err := h.bus.SetCursor(ctx, topic, group, target); err != nil {
		if errors.Is(err, event.ErrGroupActive) {
			return CursorResult{}, fmt.Errorf("%w: %v (subscribers in this process: close them first)", ErrConflict, err)
		}
		return CursorResult{}, err
	}
	return CursorResult{Topic: topic, Group: group, Seq: target}, nil
}

func (h *Handler) cursorEndpoint(r *http.Request, p params) (any, error) {
	topic, group, err := p.topicAndGroup()
	if err != nil {
		return nil, err
	}
	to := p.str("to")
	if !p.v.Has("to") {
		return nil, invalid("to", "required (earliest, latest, seq or time)")
	}
	seq, err := p.uint("seq", 0, 0, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	ts, err := p.uint("ts", 0, 0, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	switch {
	case to == "seq" && !p.v.Has("seq"):
		return nil, invalid("seq", "required with to=seq")
	case to == "time" && !p.v.Has("ts"):
		return nil, invalid("ts", "required with to=time (Unix ms)")
	}
	force, err := p.bool("force")
	if err != nil {
		return nil, err
	}
	if err := h.ready(r, p, acl.Admin, topic, group); err != nil {
		return nil, err
	}
	res, err := h.ResetCursor(r.Context(), topic, group, to, seq, int64(ts), force)
	h.audit(r, "cursor_reset", topic, group, err, "to", to, "seq", res.Seq, "force", force)
	return res, err
}

// DeleteGroupResult is the body of POST /ops/groups/delete.
type DeleteGroupResult struct {
	Topic   string `json:"topic"`
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
}

// DeleteGroup deletes group on topic from the store (its cursors, state,
// leases and members): it is no longer listed, and a subscriber that
// joins later starts it afresh. Refused ([ErrConflict]) while it has live
// members unless force is set.
func (h *Handler) DeleteGroup(ctx context.Context, topic, group string, force bool) (DeleteGroupResult, error) {
	if h.cfg.Lister == nil {
		return DeleteGroupResult{}, fmt.Errorf("%w: deleting a group needs a store that implements event.Lister", ErrNotSupported)
	}
	if _, ok := h.stats()[[2]string{topic, group}]; ok {
		return DeleteGroupResult{}, fmt.Errorf("%w: group %q on %q has subscribers in this process: close them first", ErrConflict, group, topic)
	}
	if !force {
		ms, err := h.liveMembers(ctx, topic, group)
		if err != nil {
			return DeleteGroupResult{}, err
		}
		if len(ms) > 0 {
			return DeleteGroupResult{}, fmt.Errorf("%w: group %q on %q has live members %v: stop them, or pass force", ErrConflict, group, topic, ms)
		}
	}
	if err := h.cfg.Lister.DeleteGroup(ctx, topic, group); err != nil {
		return DeleteGroupResult{}, fmt.Errorf("ops: delete group %q of %q: %w", group, topic, err)
	}
	return DeleteGroupResult{Topic: topic, Group: group, Deleted: true}, nil
}

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
	res, err := h.DeleteGroup(r.Context(), topic, group, force)
	h.audit(r, "group_delete", topic, group, err, "force", force)
	return res, err
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
	// Subscriptions are "topic/group" of each subscription.
	Subscriptions []string `json:"subscriptions"`
	// QueueDepth counts the frames queued for the client.
	QueueDepth int `json:"queue_depth"`
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
		if h.cfg.Verifier != nil && len(subs) == 0 {
			continue
		}
		c.Subscriptions = subs
		c.AgeMs = max(now.Sub(c.Since).Milliseconds(), 0)
		resp.Connections = append(resp.Connections, c)
	}
	return resp, nil
}

// GroupsResponse is the body of GET /ops/groups: the groups of a topic
// with their lag, members, partitions and, in this Bus, deliveries.
type GroupsResponse struct {
	Topic  string       `json:"topic"`
	Groups []GroupState `json:"groups"`
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
	stats := h.stats()
	_, infos, err := h.topicInfos(ctx, stats)
	if err != nil {
		return nil, err
	}
	ts, err := h.topicState(ctx, topic, infos, stats, inspectable(ctx))
	if err != nil {
		return nil, err
	}
	return GroupsResponse{Topic: topic, Groups: ts.Groups}, nil
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
