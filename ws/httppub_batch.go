package ws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
	"github.com/promethean/promlib/ratelimit"
	"golang.org/x/time/rate"
)

// Batch HTTP publish: one request, many events, one result each.

// BatchItem is one event of a batch HTTP publish: the payload (required)
// and the record's optional fields, named as in the records the gateway
// sends.
type BatchItem struct {
	Payload  json.RawMessage   `json:"payload"`
	ID       string            `json:"id,omitempty"`
	Key      string            `json:"key,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
	CausedBy []string          `json:"caused_by,omitempty"`
	SID      string            `json:"sid,omitempty"`
	TS       int64             `json:"ts,omitempty"`
}

// BatchResult is the answer of a batch HTTP publish: one result per event,
// in the order of the batch, and how many were stored and refused.
type BatchResult struct {
	Stored  int               `json:"stored"`
	Failed  int               `json:"failed"`
	Results []BatchItemResult `json:"results"`
}

// BatchItemResult is the outcome of one event of a batch: its id and seq
// once stored, or the error that refused it (the codes of the protocol).
type BatchItemResult struct {
	ID    string          `json:"id,omitempty"`
	Seq   uint64          `json:"seq,omitempty"`
	Error *BatchItemError `json:"error,omitempty"`
}

// BatchItemError is why one event of a batch was not stored.
type BatchItemError struct {
	Code wsproto.Code `json:"code"`
	Msg  string       `json:"msg"`
}

// ndjson is the media type of a batch with one event per line.
const ndjson = "application/x-ndjson"

// isBatch reports whether r publishes a batch: an NDJSON body, or
// ?batch=true with a JSON array.
func isBatch(r *http.Request) (bool, *wsproto.Error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == ndjson {
		return true, nil
	}
	switch v := r.URL.Query().Get("batch"); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, wsproto.NewError(wsproto.CodeBadFrame, nil, "batch: %q, want true or false", truncate(v, 16))
	}
}

// servePublishBatch publishes the events of a batch body to topic, once
// the request passed the token, the topic, the query and the policy. Events are
// stored in the order of the batch; each bad or refused one fails alone.
func (g *Gateway) servePublishBatch(w http.ResponseWriter, r *http.Request, topic string, fail func(*wsproto.Error)) {
	body, err := httpx.ReadBody(w, r, g.cfg.MaxBatchBytes)
	if err != nil {
		if errors.Is(err, httpx.ErrTooLarge) {
			fail(wsproto.NewError(wsproto.CodeTooLarge, err, "batch body: more than %d bytes (MaxBatchBytes)", g.cfg.MaxBatchBytes))
			return
		}
		fail(wsproto.NewError(wsproto.CodeBadFrame, err, "body: %v", err))
		return
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var items []json.RawMessage
	var perr *wsproto.Error
	if mt == ndjson {
		items, perr = splitNDJSON(body, g.cfg.MaxBatchEvents)
	} else {
		items, perr = splitArray(body, g.cfg.MaxBatchEvents)
	}
	if perr != nil {
		fail(perr)
		return
	}
	if len(items) == 0 {
		fail(wsproto.NewError(wsproto.CodeBadFrame, nil, "batch: no events"))
		return
	}
	now := g.now()
	rs := make([]*rate.Reservation, len(items))
	for i := range items {
		rs[i] = g.topics.ReserveAt(now, topic)
	}
	if !ratelimit.AllOrNone(now, rs...) {
		fail(wsproto.NewError(wsproto.CodeRateLimited, nil, "publish rate of topic %q exceeded by a batch of %d events", topic, len(items)))
		return
	}

	out := BatchResult{Results: make([]BatchItemResult, len(items))}
	pub, err := g.bus.NewPublisher(event.PublisherConfig{MaxPending: len(items)})
	if err != nil {
		fail(errorOf(err, wsproto.CodeInternal))
		return
	}
	ctx := r.Context()
	results := make([]*event.PublishFuture, len(items))
	for i, raw := range items {
		opts, payload, perr := g.batchItem(raw)
		if perr != nil {
			out.Results[i].Error = &BatchItemError{Code: perr.Code, Msg: fmt.Sprintf("event %d: %s", i, perr.Msg)}
			continue
		}
		results[i] = pub.Publish(ctx, topic, payload, opts...)
	}
	for i, res := range results {
		if res == nil {
			out.Failed++
			continue
		}
		rec, err := res.Get(context.WithoutCancel(ctx))
		if err != nil {
			e := errorOf(err, wsproto.CodePublishFailed)
			out.Results[i].Error = &BatchItemError{Code: e.Code, Msg: fmt.Sprintf("event %d: %s", i, e.Msg)}
			out.Failed++
			continue
		}
		out.Results[i].ID, out.Results[i].Seq = rec.ID, rec.Seq
		out.Stored++
	}
	if out.Failed > 0 {
		g.log.Warn("ws: HTTP batch publish: events refused", "topic", topic, "failed", out.Failed, "stored", out.Stored)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// batchItem decodes and checks one event of a batch.
func (g *Gateway) batchItem(raw json.RawMessage) ([]event.PublishOption, []byte, *wsproto.Error) {
	// encoding/json would turn text that is not UTF-8 into U+FFFD; refuse
	// it instead, as every publish path does.
	if !utf8.Valid(raw) {
		return nil, nil, wsproto.NewError(wsproto.CodeBadJSON, nil, "not valid UTF-8")
	}
	if !json.Valid(raw) {
		return nil, nil, wsproto.NewError(wsproto.CodeBadJSON, nil, "not JSON")
	}
	var it BatchItem
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&it); err != nil {
		return nil, nil, wsproto.NewError(wsproto.CodeBadFrame, err, "want an object {\"payload\":...} with optional id, key, headers, tags, caused_by, sid, ts: %v", err)
	}
	if len(it.Payload) == 0 {
		return nil, nil, wsproto.NewError(wsproto.CodeBadFrame, nil, "payload: missing")
	}
	if int64(len(it.Payload)) > g.cfg.MaxPayload {
		return nil, nil, wsproto.NewError(wsproto.CodeTooLarge, nil, "payload: %d bytes, more than %d (MaxPayload)", len(it.Payload), g.cfg.MaxPayload)
	}
	if err := event.ValidatePayload(it.Payload); err != nil {
		return nil, nil, wsproto.NewError(wsproto.CodeBadJSON, err, "payload: %v", err)
	}
	if it.TS < 0 {
		return nil, nil, wsproto.NewError(wsproto.CodeBadFrame, nil, "ts: %d, want milliseconds since the epoch", it.TS)
	}
	opts := []event.PublishOption{
		event.WithID(it.ID), event.WithKey(it.Key), event.WithSID(it.SID), event.WithTS(it.TS),
	}
	if it.Headers != nil {
		opts = append(opts, event.WithHeaders(it.Headers))
	}
	if len(it.Tags) > 0 {
		opts = append(opts, event.WithTags(it.Tags...))
	}
	if len(it.CausedBy) > 0 {
		opts = append(opts, event.WithCausedBy(it.CausedBy...))
	}
	var o event.PublishOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.Validate(); err != nil {
		return nil, nil, errorOf(err, wsproto.CodeBadFrame)
	}
	return opts, it.Payload, nil
}

// splitNDJSON splits a body into its non-blank lines, at most max.
func splitNDJSON(body []byte, max int) ([]json.RawMessage, *wsproto.Error) {
	var items []json.RawMessage
	for line := range bytes.Lines(body) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(items) == max {
			return nil, batchTooMany(max)
		}
		items = append(items, json.RawMessage(line))
	}
	return items, nil
}

// splitArray splits a JSON array into its elements, at most max.
func splitArray(body []byte, max int) ([]json.RawMessage, *wsproto.Error) {
	if !utf8.Valid(body) {
		return nil, wsproto.NewError(wsproto.CodeBadJSON, nil, "batch body: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('[') {
		return nil, wsproto.NewError(wsproto.CodeBadJSON, err, "batch body: want a JSON array of events (or an %s body)", ndjson)
	}
	var items []json.RawMessage
	for dec.More() {
		if len(items) == max {
			return nil, batchTooMany(max)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, wsproto.NewError(wsproto.CodeBadJSON, err, "batch body: event %d: %v", len(items), err)
		}
		items = append(items, raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, wsproto.NewError(wsproto.CodeBadJSON, err, "batch body: %v", err)
	}
	if rest := strings.TrimSpace(string(body[dec.InputOffset():])); rest != "" {
		return nil, wsproto.NewError(wsproto.CodeBadJSON, nil, "batch body: data after the array")
	}
	return items, nil
}

func batchTooMany(max int) *wsproto.Error {
	return wsproto.NewError(wsproto.CodeTooLarge, nil, "batch: more than %d events (MaxBatchEvents)", max)
}
