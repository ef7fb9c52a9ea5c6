package ops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/event"
)

// Headers set on a redriven record. The x-dlq-* headers of the
// dead-lettered record are not copied.
const (
	// HeaderRedriveID is the id of the record that was dead-lettered.
	HeaderRedriveID = "x-redrive-id"
	// HeaderRedriveGroup is the consumer group that dead-lettered it: the
	// redriven record reaches every group of the topic, and a group that
	// had acked the original may filter on this header.
	HeaderRedriveGroup = "x-redrive-group"
)

// redriveNamespace derives the ids of redriven records.
var redriveNamespace = uuid.MustParse("0b7e3c1e-58a4-4c47-9d0f-3f3a3c6d2b85")

// dlqHeaderPrefix starts the headers the Bus sets when it dead-letters.
const dlqHeaderPrefix = "x-dlq-"

// readPage bounds one store read of a dead-letter topic.
const readPage = 256

func (h *Handler) redriveCursor(ctx context.Context, dlq string) (uint64, error) {
	c, err := h.bus.Cursor(ctx, dlq, h.cfg.RedriveGroup)
	if errors.Is(err, event.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return c.Seq, nil
}

func (h *Handler) dlqState(ctx context.Context, topic string) (DLQState, error) {
	dlq := event.DeadLetterTopic(topic)
	head, err := h.bus.Store().Head(ctx, dlq)
	if err != nil {
		return DLQState{}, fmt.Errorf("ops: head of %q: %w", dlq, err)
	}
	cur, err := h.redriveCursor(ctx, dlq)
	if err != nil {
		return DLQState{}, err
	}
	d := DLQState{Topic: dlq, Head: head, Redriven: cur}
	if head > cur {
		d.Pending = head - cur
	}
	return d, nil
}

// DLQResponse is the body of GET /ops/dlq: the dead-letter topic's state
// and up to limit of its records after the given seq.
type DLQResponse struct {
	Topic   string         `json:"topic"`
	DLQ     DLQState       `json:"dlq"`
	Records []event.Record `json:"records"`
	// Next is the seq to pass as after for the next page; 0 when this
	// page reached the head.
	Next uint64 `json:"next,omitempty"`
}

func (h *Handler) dlqEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", true)
	if err != nil {
		return nil, err
	}
	const unset = math.MaxUint64
	after, err := p.uint("after", unset, 0, math.MaxUint64-1)
	if err != nil {
		return nil, err
	}
	limit, err := p.uint("limit", uint64(h.cfg.PeekLimit), 1, uint64(h.cfg.MaxLimit))
	if err != nil {
		return nil, err
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	if err := h.check(r, acl.Inspect, topic, ""); err != nil {
		return nil, err
	}
	ctx := r.Context()
	st, err := h.dlqState(ctx, topic)
	if err != nil {
		return nil, err
	}
	if after == unset {
		after = st.Redriven
	}
	recs, err := h.bus.Store().Read(ctx, st.Topic, after, int(limit))
	if err != nil {
		return nil, fmt.Errorf("ops: read %q: %w", st.Topic, err)
	}
	resp := DLQResponse{Topic: topic, DLQ: st, Records: recs}
	if resp.Records == nil {
		resp.Records = []event.Record{}
	}
	if n := len(recs); n == int(limit) && recs[n-1].Seq < st.Head {
		resp.Next = recs[n-1].Seq
	}
	return resp, nil
}

// RedriveResult is what [Handler.Redrive] did, and the body of POST
// /ops/dlq/redrive.
type RedriveResult struct {
	Topic    string `json:"topic"`
	DLQTopic string `json:"dlq_topic"`
	// Redriven counts the records published back to Topic; Skipped those
	// that were dead-lettered from another topic (their x-dlq-topic
	// header names it) and were passed over.
	Redriven int `json:"redriven"`
	Skipped  int `json:"skipped"`
	// Cursor is the redrive cursor now; Pending counts the dead-lettered
	// records after it.
	Cursor  uint64           `json:"cursor"`
	Pending uint64           `json:"pending"`
	Records []RedrivenRecord `json:"records"`
}

// RedrivenRecord pairs a dead-lettered record with the record it was
// redriven as.
type RedrivenRecord struct {
	// DLQSeq and DLQID are the dead-lettered record's.
	DLQSeq uint64 `json:"dlq_seq"`
	DLQID  string `json:"dlq_id"`
	// OriginalID is the id of the record that was dead-lettered.
	OriginalID string `json:"original_id,omitempty"`
	// ID and Seq are the redriven record's in Topic.
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
}

// Redrive publishes up to limit records of topic's dead-letter topic that
// were not redriven yet back to topic, in order, and advances the redrive
// cursor past them (the cursor of Config.RedriveGroup on the dead-letter
// topic), so that each dead-lettered record is redriven once.
//
// A redriven record has the dead-lettered one's payload, key, tags, sid
// and headers without the x-dlq-* ones, plus [HeaderRedriveID] and
// [HeaderRedriveGroup]; its caused_by is the dead-lettered record's id, its
// ts the time of the redrive and its id a new one derived from the
// dead-lettered record's id. The original id cannot be used: the topic
// still holds it, and publishing it again would store nothing. Deriving
// the id makes a redrive that is repeated (after a crash between the
// publish and the cursor write, or by two processes at once) store each
// record once: publishing is idempotent by id.
//
// Redrives through one Handler run one at a time. A redriven record goes
// to every consumer group of topic, not only to the group that
// dead-lettered it; see [HeaderRedriveGroup].
func (h *Handler) Redrive(ctx context.Context, topic string, limit int) (RedriveResult, error) {
	if err := event.ValidateTopic(topic); err != nil {
		return RedriveResult{}, err
	}
	if limit < 1 {
		return RedriveResult{}, invalid("limit", "%d, want at least 1", limit)
	}
	h.redriveMu.Lock()
	defer h.redriveMu.Unlock()

	dlq := event.DeadLetterTopic(topic)
	res := RedriveResult{Topic: topic, DLQTopic: dlq, Records: []RedrivenRecord{}}
	cur, err := h.redriveCursor(ctx, dlq)
	if err != nil {
		return RedriveResult{}, err
	}
	st := h.bus.Store()
	pos := cur
	for res.Redriven+res.Skipped < limit {
		n := min(limit-res.Redriven-res.Skipped, readPage)
		dead, err := st.Read(ctx, dlq, pos, n)
		if err != nil {
			return RedriveResult{}, fmt.Errorf("ops: read %q: %w", dlq, err)
		}
		if len(dead) == 0 {
			break
		}
		recs := make([]event.Record, 0, len(dead))
		refs := make([]RedrivenRecord, 0, len(dead))
		for i := range dead {
			d := &dead[i]
			if from, ok := d.Headers[event.HeaderDLQTopic]; ok && from != topic {
				res.Skipped++
				continue
			}
			rec, err := h.redriven(topic, d)
			if err != nil {
				return RedriveResult{}, err
			}
			recs = append(recs, rec)
			refs = append(refs, RedrivenRecord{DLQSeq: d.Seq, DLQID: d.ID, OriginalID: d.Headers[event.HeaderDLQID]})
		}
		if len(recs) > 0 {
			out, err := h.bus.Append(ctx, topic, recs)
			if err != nil {
				return RedriveResult{}, err
			}
			for i := range out {
				refs[i].ID, refs[i].Seq = out[i].ID, out[i].Seq
			}
			res.Records = append(res.Records, refs...)
			res.Redriven += len(out)
		}
		pos = dead[len(dead)-1].Seq
		// The cursor moves after each page is published: a failure later
		// leaves what was redriven marked.
		if err := h.bus.SetCursor(ctx, dlq, h.cfg.RedriveGroup, pos); err != nil {
			return RedriveResult{}, fmt.Errorf("ops: set redrive cursor of %q: %w", dlq, err)
		}
		if len(dead) < n {
			break
		}
	}
	head, err := st.Head(ctx, dlq)
	if err != nil {
		return RedriveResult{}, fmt.Errorf("ops: head of %q: %w", dlq, err)
	}
	res.Cursor = pos
	if head > pos {
		res.Pending = head - pos
	}
	return res, nil
}

// redriven builds the record that redrives d to topic.
func (h *Handler) redriven(topic string, d *event.Record) (event.Record, error) {
	hdr := make(map[string]string, len(d.Headers))
	for k, v := range d.Headers {
		if !strings.HasPrefix(k, dlqHeaderPrefix) {
			hdr[k] = v
		}
	}
	if id := d.Headers[event.HeaderDLQID]; id != "" {
		hdr[HeaderRedriveID] = id
	}
	if g := d.Headers[event.HeaderDLQGroup]; g != "" {
		hdr[HeaderRedriveGroup] = g
	}
	id := uuid.NewSHA1(redriveNamespace, []byte(d.Topic+"\x00"+d.ID)).String()
	return h.bus.NewRecord(topic, d.Payload, event.PublishOptions{
		ID: id, Key: d.Key, Headers: hdr, Tags: d.Tags, CausedBy: []string{d.ID}, SID: d.SID, ContentType: d.ContentType,
	})
}

func (h *Handler) redriveEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", true)
	if err != nil {
		return nil, err
	}
	limit, err := p.uint("limit", uint64(h.cfg.MaxLimit), 1, uint64(h.cfg.MaxLimit))
	if err != nil {
		return nil, err
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	if err := h.check(r, acl.Admin, topic, ""); err != nil {
		return nil, err
	}
	return h.Redrive(r.Context(), topic, int(limit))
}
