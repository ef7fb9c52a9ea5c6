package ops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/event"
)

// Dead letters belong to the group that failed them: the Bus moves a
// record that failed its last attempt in group G of topic T to T's
// dead-letter topic ("<T>.dlq") with the x-dlq-group header naming G.
// The DLQ of a group is the records of that topic that name it and were
// neither redriven nor purged. Redrive ([event.Bus.Redrive]) delivers
// them again to G only, through G's redrive topic; purge drops them from
// the group's DLQ. Both mark the dead-lettered records done: the marks of
// a dead-letter topic are the committed cursor and the settled set of
// Config.RedriveGroup on it (partition 0), in the store's cursors and
// group state, so every Handler over the store sees them and each record
// is redriven once.

// readPage bounds one store read of a dead-letter topic; scanPages bounds
// the reads of one request.
const (
	readPage  = 256
	scanPages = 16
)

// dlqMarks are the records of a dead-letter topic that are done.
type dlqMarks struct {
	cursor uint64          // every seq up to it is done
	done   map[uint64]bool // and these above it
}

func (m *dlqMarks) isDone(seq uint64) bool { return seq <= m.cursor || m.done[seq] }

func (h *Handler) markRef(dlq string) event.PartitionRef {
	return event.PartitionRef{Topic: dlq, Group: h.cfg.RedriveGroup, Partition: 0}
}

func (h *Handler) markStores() (event.GroupStateStore, event.CursorStore, error) {
	gs, ok := h.bus.Store().(event.GroupStateStore)
	cs, ok2 := h.bus.Store().(event.CursorStore)
	if !ok || !ok2 {
		return nil, nil, fmt.Errorf("%w: the DLQ of a group needs a store that implements event.GroupStateStore and event.CursorStore", ErrNotSupported)
	}
	return gs, cs, nil
}

func (h *Handler) marks(ctx context.Context, dlq string) (dlqMarks, error) {
	m := dlqMarks{done: map[uint64]bool{}}
	gs, cs, err := h.markStores()
	if err != nil {
		return m, err
	}
	cur, err := cs.Cursors(ctx, dlq, h.cfg.RedriveGroup)
	if err != nil {
		return m, fmt.Errorf("ops: marks of %q: %w", dlq, err)
	}
	m.cursor = cur[0]
	st, err := gs.GroupState(ctx, h.markRef(dlq))
	if err != nil {
		return m, fmt.Errorf("ops: marks of %q: %w", dlq, err)
	}
	for _, s := range st.Settled {
		m.done[s] = true
	}
	return m, nil
}

// mark marks seqs of dlq done, and moves the cursor over the done ones
// that follow it.
func (h *Handler) mark(ctx context.Context, dlq string, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	gs, cs, err := h.markStores()
	if err != nil {
		return err
	}
	ref := h.markRef(dlq)
	if err := gs.UpdateGroupState(ctx, ref, event.GroupStateUpdate{Settled: seqs}, event.Fence{}); err != nil {
		return fmt.Errorf("ops: mark %q: %w", dlq, err)
	}
	m, err := h.marks(ctx, dlq)
	if err != nil {
		return err
	}
	c := m.cursor
	var forget []uint64
	for m.done[c+1] {
		c++
		forget = append(forget, c)
	}
	if c == m.cursor {
		return nil
	}
	if err := cs.CommitCursor(ctx, ref, c, event.Fence{}); err != nil {
		return fmt.Errorf("ops: mark %q: %w", dlq, err)
	}
	if err := gs.UpdateGroupState(ctx, ref, event.GroupStateUpdate{Forget: forget}, event.Fence{}); err != nil {
		return fmt.Errorf("ops: mark %q: %w", dlq, err)
	}
	return nil
}

// DLQState is a topic's dead-letter topic: its head and how many of its
// records wait in the DLQs of the groups (not redriven nor purged).
type DLQState struct {
	Topic   string `json:"topic"`
	Head    uint64 `json:"head"`
	Pending uint64 `json:"pending"`
}

func (h *Handler) dlqState(ctx context.Context, topic string) (DLQState, error) {
	dlq := event.DeadLetterTopic(topic)
	head, err := h.bus.Store().Head(ctx, dlq)
	if err != nil {
		return DLQState{}, fmt.Errorf("ops: head of %q: %w", dlq, err)
	}
	d := DLQState{Topic: dlq, Head: head}
	if head == 0 {
		return d, nil
	}
	m, err := h.marks(ctx, dlq)
	if errors.Is(err, ErrNotSupported) {
		return d, nil
	}
	if err != nil {
		return DLQState{}, err
	}
	if head > m.cursor {
		d.Pending = head - m.cursor - uint64(len(m.done))
	}
	return d, nil
}

// deadOf reports whether the dead-lettered record d failed in group of
// topic.
func deadOf(d *event.Record, topic, group string) bool {
	t, g, _, _, err := event.DeadLetterOrigin(d)
	return err == nil && t == topic && g == group
}

// pending returns up to limit records of the DLQ of group on topic after
// seq after, oldest first, and the seq to continue after (0 at the head).
func (h *Handler) pending(ctx context.Context, topic, group string, after uint64, limit int) ([]event.Record, uint64, error) {
	dlq := event.DeadLetterTopic(topic)
	m, err := h.marks(ctx, dlq)
	if err != nil {
		return nil, 0, err
	}
	st := h.bus.Store()
	pos := max(after, m.cursor)
	out := []event.Record{}
	for range scanPages {
		recs, err := st.Read(ctx, dlq, pos, readPage)
		if err != nil {
			return nil, 0, fmt.Errorf("ops: read %q: %w", dlq, err)
		}
		for i := range recs {
			d := &recs[i]
			pos = d.Seq
			if !m.isDone(d.Seq) && deadOf(d, topic, group) {
				out = append(out, *d)
				if len(out) == limit {
					return out, pos, nil
				}
			}
		}
		if len(recs) < readPage {
			return out, 0, nil
		}
	}
	return out, pos, nil
}

// selected returns the records of the DLQ of group on topic with the
// given ids (of the dead-lettered records); an id that is not there, not
// the group's, or done already is an error naming it.
func (h *Handler) selected(ctx context.Context, topic, group string, ids []string) ([]event.Record, error) {
	dlq := event.DeadLetterTopic(topic)
	m, err := h.marks(ctx, dlq)
	if err != nil {
		return nil, err
	}
	out := make([]event.Record, 0, len(ids))
	for _, id := range ids {
		d, err := h.bus.Store().FindByID(ctx, dlq, id)
		if errors.Is(err, event.ErrNotFound) || err == nil && (!deadOf(&d, topic, group) || m.isDone(d.Seq)) {
			return nil, fmt.Errorf("%w: no record %q in the DLQ of group %q on %q", ErrNotFound, id, group, topic)
		}
		if err != nil {
			return nil, fmt.Errorf("ops: read %q: %w", dlq, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// DLQResponse is the body of GET /ops/dlq: a page of the DLQ of a group,
// oldest first.
type DLQResponse struct {
	Topic   string         `json:"topic"`
	Group   string         `json:"group"`
	DLQ     DLQState       `json:"dlq"`
	Records []event.Record `json:"records"`
	// Next is the seq to pass as after for the next page; 0 when this
	// page reached the head.
	Next uint64 `json:"next,omitempty"`
}

func (h *Handler) dlqEndpoint(r *http.Request, p params) (any, error) {
	topic, group, err := p.topicAndGroup()
	if err != nil {
		return nil, err
	}
	after, err := p.uint("after", 0, 0, math.MaxUint64-1)
	if err != nil {
		return nil, err
	}
	limit, err := p.uint("limit", uint64(h.cfg.PeekLimit), 1, uint64(h.cfg.MaxLimit))
	if err != nil {
		return nil, err
	}
	if err := h.ready(r, p, acl.Inspect, topic, group); err != nil {
		return nil, err
	}
	ctx := r.Context()
	st, err := h.dlqState(ctx, topic)
	if err != nil {
		return nil, err
	}
	recs, next, err := h.pending(ctx, topic, group, after, int(limit))
	if err != nil {
		return nil, err
	}
	return DLQResponse{Topic: topic, Group: group, DLQ: st, Records: recs, Next: next}, nil
}

// DLQActionResult is what [Handler.Redrive] and [Handler.Purge] did, and
// the body of POST /ops/dlq/redrive and /ops/dlq/purge.
type DLQActionResult struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// IDs are those of the dead-lettered records redriven or purged.
	IDs []string `json:"ids"`
	// Records are the records stored in the group's redrive topic (redrive
	// only).
	Records []event.Record `json:"records,omitempty"`
}

// Redrive delivers records of the DLQ of group on topic again to that
// group only ([event.Bus.Redrive]) and marks them done: those with the
// given ids (of the dead-lettered records), or with no ids the oldest
// limit ones. Redrives and purges through one Handler run one at a time;
// a record is redriven once, also when two Handlers race (the redriven
// record's id derives from the dead-lettered one's).
func (h *Handler) Redrive(ctx context.Context, topic, group string, ids []string, limit int) (DLQActionResult, error) {
	return h.dlqAction(ctx, topic, group, ids, limit, true)
}

// Purge drops records of the DLQ of group on topic, as [Handler.Redrive]
// selects them, without redriving them: they are marked done, and stay in
// the dead-letter topic until its retention deletes them.
func (h *Handler) Purge(ctx context.Context, topic, group string, ids []string, limit int) (DLQActionResult, error) {
	return h.dlqAction(ctx, topic, group, ids, limit, false)
}

func (h *Handler) dlqAction(ctx context.Context, topic, group string, ids []string, limit int, redrive bool) (DLQActionResult, error) {
	if err := event.ValidateTopic(topic); err != nil {
		return DLQActionResult{}, err
	}
	if err := event.ValidateGroup(group); err != nil {
		return DLQActionResult{}, err
	}
	if limit < 1 {
		return DLQActionResult{}, invalid("limit", "%d, want at least 1", limit)
	}
	h.redriveMu.Lock()
	defer h.redriveMu.Unlock()
	var dead []event.Record
	var err error
	if len(ids) > 0 {
		dead, err = h.selected(ctx, topic, group, ids)
	} else {
		dead, _, err = h.pending(ctx, topic, group, 0, limit)
	}
	if err != nil {
		return DLQActionResult{}, err
	}
	res := DLQActionResult{Topic: topic, Group: group, IDs: make([]string, 0, len(dead))}
	seqs := make([]uint64, 0, len(dead))
	for _, d := range dead {
		res.IDs = append(res.IDs, d.ID)
		seqs = append(seqs, d.Seq)
	}
	if redrive && len(dead) > 0 {
		if res.Records, err = h.bus.Redrive(ctx, dead); err != nil {
			return DLQActionResult{}, err
		}
	}
	// Marked after the redrive: a failure between them redrives again,
	// and the derived ids store nothing twice.
	if err := h.mark(ctx, event.DeadLetterTopic(topic), seqs); err != nil {
		return DLQActionResult{}, err
	}
	return res, nil
}

// ids reads parameter name: ids separated by commas, at most max.
func (p params) ids(name string, maxIDs int) ([]string, error) {
	s := p.str(name)
	if !p.v.Has(name) {
		return nil, nil
	}
	var out []string
	for _, id := range strings.Split(s, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			return nil, invalid(name, "an empty id in %q", s)
		}
		out = append(out, id)
	}
	if len(out) > maxIDs {
		return nil, invalid(name, "%d ids, more than %d", len(out), maxIDs)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (h *Handler) dlqActionEndpoint(redrive bool) endpoint {
	return func(r *http.Request, p params) (any, error) {
		topic, group, err := p.topicAndGroup()
		if err != nil {
			return nil, err
		}
		ids, err := p.ids("ids", h.cfg.MaxLimit)
		if err != nil {
			return nil, err
		}
		limit, err := p.uint("limit", uint64(h.cfg.MaxLimit), 1, uint64(h.cfg.MaxLimit))
		if err != nil {
			return nil, err
		}
		if err := h.ready(r, p, acl.Admin, topic, group); err != nil {
			return nil, err
		}
		action := "purge"
		if redrive {
			action = "redrive"
		}
		res, err := h.dlqAction(r.Context(), topic, group, ids, int(limit), redrive)
		h.audit(r, action, topic, group, err, "ids", res.IDs)
		return res, err
	}
}

// Headers of a redriven record, as [event.Bus.Redrive] sets them.
const (
	HeaderRedriveID    = event.HeaderRedriveID
	HeaderRedriveGroup = event.HeaderRedriveGroup
)
