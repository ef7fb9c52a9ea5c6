package ops

import (
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/promethean/promlib/acl"
)

// The dead letters of a group are the core's ([event.Bus.DeadLetters]):
// GET /ops/dlq lists them, POST /ops/dlq/redrive delivers them again to
// that group only ([event.Bus.RedriveDeadLetters]), POST /ops/dlq/purge
// drops them ([event.Bus.PurgeDeadLetters]).

// dlqEndpoint answers a page of the dead letters of a group
// ([event.DeadLetterPage]).
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
	return h.bus.DeadLetters(r.Context(), topic, group, after, int(limit))
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

// dlqActionEndpoint redrives or purges dead letters of a group: those
// with the ids given, or the oldest limit ones ([event.DeadLetterResult]).
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
		action, settle := "purge", h.bus.PurgeDeadLetters
		if redrive {
			action, settle = "redrive", h.bus.RedriveDeadLetters
		}
		res, err := settle(r.Context(), topic, group, ids, int(limit))
		h.audit(r, action, topic, group, err, "ids", res.IDs)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
}
