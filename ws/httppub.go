package ws

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
	"github.com/promethean/promlib/ratelimit"
)

// PublishHandler returns the minimal HTTP publish endpoint: POST a JSON
// body to /publish/{topic} and get {"id","seq"} of the stored event.
//
// A batch publishes many events in one request: an application/x-ndjson
// body (one event per line), or ?batch=true with a JSON array of events.
// Each event is an object {"payload":...} with the optional fields of a
// [BatchItem]. The answer is a [BatchResult]: 200 with one result per
// event, in the order of the batch (its id and seq, or the error of that
// event alone, e.g. bad_json); the events are stored in that order, and a
// bad one does not stop the others. A body over Config.MaxBatchBytes or
// with more than Config.MaxBatchEvents events is refused whole with 413
// too_large naming the limit, a body that does not parse with 400.
//
// Mount it on a pattern with a {topic} wildcard, such as
// "POST /publish/{topic}"; elsewhere the topic is the last path segment.
// The token goes in an "Authorization: Bearer <token>" header and is
// checked by the gateway's Verifier, as AUTH is ([auth.OpenAccess] takes
// none), and the publish by the principal's policy ([acl.Publish]), as
// PUBLISH is. The query may set the record's id, key, sid, ts (ms), and
// tag and caused_by (each repeatable). The per-topic publish limit
// applies.
//
// The body is JSON unless its Content-Type names another type: a body of
// application/octet-stream (or of any type but JSON and the types an HTML
// form can send, which stay JSON as before) is stored as bytes with that
// content type ([event.WithContentType]), and a text/* body must be UTF-8.
//
// A request is checked in the order of every HTTP endpoint of promlib:
// method (405), token (401), topic and query (400), policy (403), then the
// body (413, 400), the rate limit (429), the topic's schema (422) and
// the store (500). Errors have
// the body of every HTTP endpoint, {"error":{"code":"...","msg":"..."}},
// with the codes of the WebSocket protocol: 400 bad_json or bad_frame, 401
// unauthorized (no bearer token), auth_failed or token_expired (with a
// WWW-Authenticate: Bearer challenge), 403 forbidden, 405 bad_frame (not
// POST), 413 too_large, 429 rate_limited, 422 schema_invalid (the payload does not match the
// topic's schema), 500 publish_failed or internal,
// and 503 auth_unavailable when the signing keys cannot be fetched (as
// [auth.WriteError] answers).
func (g *Gateway) PublishHandler() http.Handler {
	return http.HandlerFunc(g.servePublish)
}

func (g *Gateway) servePublish(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var code wsproto.Code
	defer func() { g.obs.Handled("HTTP_PUBLISH", code, time.Since(start)) }()
	fail := func(e *wsproto.Error) {
		code = e.Code
		writeHTTPError(w, e)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		code = wsproto.CodeBadFrame
		httpx.WriteError(w, http.StatusMethodNotAllowed, string(wsproto.CodeBadFrame), "method "+truncate(r.Method, 16)+" is not allowed: use POST")
		return
	}

	// Without a bearer token the Verifier still gets to say (OpenAccess
	// takes none); if it refuses, the answer is that the token is missing.
	token, noToken := auth.BearerToken(r)
	p, perr := g.authenticate(r.Context(), token)
	if perr != nil {
		if noToken != nil && perr.Code == wsproto.CodeAuthFailed {
			perr = wsproto.NewError(wsproto.CodeUnauthorized, noToken, "%v; send \"Authorization: Bearer <token>\"", noToken)
		}
		fail(perr)
		return
	}

	topic := r.PathValue("topic")
	if topic == "" {
		topic = r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	}
	if err := event.ValidateTopic(topic); err != nil {
		fail(wsproto.NewError(wsproto.CodeBadFrame, err, "%v", err))
		return
	}
	batch, perr := isBatch(r)
	var opts []event.PublishOption
	if perr == nil {
		opts, perr = publishQuery(r, batch)
	}
	if perr != nil {
		fail(perr)
		return
	}
	if err := p.Check(acl.Publish, topic, ""); err != nil {
		fail(wsproto.NewError(wsproto.CodeForbidden, err, "publish to %q: %v", topic, err))
		return
	}
	if batch {
		g.servePublishBatch(w, r, topic, fail)
		return
	}

	body, err := httpx.ReadBody(w, r, g.cfg.MaxPayload)
	if err != nil {
		if errors.Is(err, httpx.ErrTooLarge) {
			fail(wsproto.NewError(wsproto.CodeTooLarge, err, "body: more than %d bytes", g.cfg.MaxPayload))
			return
		}
		fail(wsproto.NewError(wsproto.CodeBadFrame, err, "body: %v", err))
		return
	}
	ct, perr := bodyContentType(r)
	if perr != nil {
		fail(perr)
		return
	}
	if err := event.ValidatePayloadAs(body, ct); err != nil {
		fail(wsproto.NewError(wsproto.CodeBadJSON, err, "body: %v", err))
		return
	}
	if ct != "" {
		opts = append(opts, event.WithContentType(ct))
	}
	if now := g.now(); !ratelimit.AllOrNone(now, g.topics.ReserveAt(now, topic)) {
		fail(wsproto.NewError(wsproto.CodeRateLimited, nil, "publish rate of topic %q exceeded", topic))
		return
	}
	rec, err := g.bus.Publish(r.Context(), topic, body, opts...)
	if err != nil {
		g.log.Warn("ws: HTTP publish failed", "topic", topic, "err", err)
		fail(errorOf(err, wsproto.CodePublishFailed))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, wsproto.Published{ID: rec.ID, Seq: rec.Seq})
}

// writeHTTPError answers with the status of e's code and the JSON error
// body of every HTTP endpoint. Signing keys that cannot be fetched are
// answered as [auth.WriteError] answers them: 503 auth_unavailable.
func writeHTTPError(w http.ResponseWriter, e *wsproto.Error) {
	if errors.Is(e, auth.ErrKeysUnavailable) || errors.Is(e, auth.ErrClosed) {
		auth.WriteError(w, e)
		return
	}
	httpx.WriteError(w, httpStatus(e.Code), string(e.Code), e.Msg)
}

// publishQuery reads the record options of an HTTP publish; a batch takes
// them from its events, not from the query.
func publishQuery(r *http.Request, batch bool) ([]event.PublishOption, *wsproto.Error) {
	q := r.URL.Query()
	if batch {
		for _, k := range []string{"id", "key", "sid", "ts", "tag", "caused_by"} {
			if q.Has(k) {
				return nil, wsproto.NewError(wsproto.CodeBadFrame, nil, "%s: not allowed on a batch; give each event its fields", k)
			}
		}
		return nil, nil
	}
	var opts []event.PublishOption
	if v := q.Get("id"); v != "" {
		opts = append(opts, event.WithID(v))
	}
	if v := q.Get("key"); v != "" {
		opts = append(opts, event.WithKey(v))
	}
	if v := q.Get("sid"); v != "" {
		opts = append(opts, event.WithSID(v))
	}
	if v := q.Get("ts"); v != "" {
		ts, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ts < 0 {
			return nil, wsproto.NewError(wsproto.CodeBadFrame, err, "ts: %q, want milliseconds since the epoch", truncate(v, 32))
		}
		opts = append(opts, event.WithTS(ts))
	}
	if v := q["tag"]; len(v) > 0 {
		opts = append(opts, event.WithTags(v...))
	}
	if v := q["caused_by"]; len(v) > 0 {
		opts = append(opts, event.WithCausedBy(v...))
	}
	var o event.PublishOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.Validate(); err != nil {
		return nil, errorOf(err, wsproto.CodeBadFrame)
	}
	return opts, nil
}

func httpStatus(c wsproto.Code) int {
	switch c {
	case wsproto.CodeBadJSON, wsproto.CodeBadFrame:
		return http.StatusBadRequest
	case wsproto.CodeUnauthorized, wsproto.CodeAuthFailed, wsproto.CodeTokenExpired:
		return http.StatusUnauthorized
	case wsproto.CodeForbidden:
		return http.StatusForbidden
	case wsproto.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case wsproto.CodeRateLimited:
		return http.StatusTooManyRequests
	case wsproto.CodeSchemaInvalid:
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}
