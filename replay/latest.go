package replay

import (
	"net/http"
	"strconv"

	"github.com/promethean/promlib/event"
)

// KeyRecord is the answer of GET /latest with a key.
type KeyRecord struct {
	// Event is the latest record (highest seq) of the key.
	Event event.Record `json:"event"`
}

// LatestPage is the answer of GET /latest without a key.
type LatestPage struct {
	// Events are the latest record of each key, in key order; never null.
	Events []event.Record `json:"events"`
	// NextAfter is set when the page is full: ask again with
	// after=NextAfter for the keys that follow. It is empty at the end.
	NextAfter string `json:"next_after,omitempty"`
}

func (h *Handler) serveLatest(w http.ResponseWriter, r *http.Request) {
	req, err := parseLatest(r.URL.RawQuery, h.cfg.DefaultLimit, h.cfg.MaxLimit)
	if err != nil {
		badRequest(w, err)
		return
	}
	if !h.authorize(w, r, req.topic) {
		return
	}
	if h.keys == nil {
		writeError(w, http.StatusNotImplemented, CodeNotImplemented, "the store keeps no latest record per key")
		return
	}
	ctx := r.Context()
	if req.key != "" {
		m, err := h.keys.LatestByKey(ctx, req.topic, []string{req.key})
		if err != nil {
			h.storeFailed(w, r, req.topic, err)
			return
		}
		rec, ok := m[req.key]
		if !ok {
			writeError(w, http.StatusNotFound, CodeNotFound, paramKey+": no record with key "+quote(req.key)+" in topic "+quote(req.topic))
			return
		}
		h.writeJSON(w, KeyRecord{Event: rec})
		return
	}
	recs, err := h.keys.Latest(ctx, req.topic, req.after, req.limit)
	if err != nil {
		h.storeFailed(w, r, req.topic, err)
		return
	}
	page := LatestPage{Events: recs}
	if len(recs) == 0 {
		page.Events = []event.Record{}
	} else if len(recs) == req.limit {
		page.NextAfter = recs[len(recs)-1].Key
	}
	h.writeJSON(w, page)
}

// quote quotes at most maxEcho bytes of s.
func quote(s string) string { return strconv.Quote(echo(s)) }
