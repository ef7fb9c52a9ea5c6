package replay

import (
	"errors"
	"net/http"

	"github.com/promethean/promlib/event"
)

// ReplayPage is the answer of GET /replay.
type ReplayPage struct {
	// Events are the records, in seq order; never null.
	Events []event.Record `json:"events"`
	// NextSeq is the seq the next page starts at: ask again with
	// from=seq&seq=NextSeq. It is one past the last record of Events, or,
	// when Events is empty, where this page would have started.
	NextSeq uint64 `json:"next_seq"`
}

func (h *Handler) serveReplay(w http.ResponseWriter, r *http.Request) {
	req, err := parseReplay(r.URL.RawQuery, h.cfg.DefaultLimit, h.cfg.MaxLimit)
	if err != nil {
		badRequest(w, err)
		return
	}
	if !h.authorize(w, r, req.topic) {
		return
	}
	ctx := r.Context()
	var after uint64 // the page holds the records with seq > after
	switch req.from {
	case event.StartEarliest:
	case event.StartSeq:
		after = req.seq - 1
	case event.StartLatest:
		if after, err = h.store.Head(ctx, req.topic); err != nil {
			h.storeFailed(w, r, req.topic, err)
			return
		}
	case event.StartTS:
		// The head first: a record appended after the search is above it.
		head, err := h.store.Head(ctx, req.topic)
		if err != nil {
			h.storeFailed(w, r, req.topic, err)
			return
		}
		seq, ok, err := h.store.FirstSeqAtOrAfter(ctx, req.topic, req.ts)
		if err != nil {
			h.storeFailed(w, r, req.topic, err)
			return
		}
		after = head
		if ok {
			after = seq - 1
		}
	case event.StartAfterID:
		rec, err := h.store.FindByID(ctx, req.topic, req.afterID)
		if errors.Is(err, event.ErrNotFound) {
			writeError(w, http.StatusNotFound, CodeNotFound, paramAfterID+": no record with id "+quote(req.afterID)+" in topic "+quote(req.topic))
			return
		}
		if err != nil {
			h.storeFailed(w, r, req.topic, err)
			return
		}
		after = rec.Seq
	}
	recs, err := h.store.Read(ctx, req.topic, after, req.limit)
	if err != nil {
		h.storeFailed(w, r, req.topic, err)
		return
	}
	page := ReplayPage{Events: recs, NextSeq: after + 1}
	if n := len(recs); n > 0 {
		page.NextSeq = recs[n-1].Seq + 1
	} else {
		page.Events = []event.Record{}
	}
	h.writeJSON(w, page)
}
