package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/promethean/promlib/acl"
)

// The charts' history is kept by the Handler, not by the page, so that a
// reload (or a second operator) sees the last ChartWindow at once:
// [Handler.Run] samples, every ChartInterval, each topic's last seq and
// the committed cursors of its groups, and keeps per series a ring of
// ChartWindow/ChartInterval points: per topic the publish and deliver
// rates (events/s between two samples), per group its lag. GET
// /ops/charts serves them.

// MaxChartSeries bounds the series of each kind (publish and deliver per
// topic, lag per group) the Handler keeps; past it, new topics and groups
// are not charted and /ops/charts says it is truncated.
const MaxChartSeries = 1000

// maxChartPoints bounds the points of a series (ChartWindow/ChartInterval).
const maxChartPoints = 20000

// ChartPoint is one point of a chart series: the sample's time (Unix ms)
// and its value. It is a [t, v] pair in JSON.
type ChartPoint struct {
	T int64
	V float64
}

// MarshalJSON implements json.Marshaler: [t, v].
func (p ChartPoint) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]float64{float64(p.T), p.V})
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *ChartPoint) UnmarshalJSON(b []byte) error {
	var a [2]float64
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	p.T, p.V = int64(a[0]), a[1]
	return nil
}

// ring is a series' last points, oldest first, bounded.
type ring struct {
	pts   []ChartPoint
	start int // index of the oldest point once full
}

func (r *ring) push(p ChartPoint, limit int) {
	if len(r.pts) < limit {
		r.pts = append(r.pts, p)
		return
	}
	r.pts[r.start] = p
	r.start = (r.start + 1) % len(r.pts)
}

// since returns the points with T > ms, oldest first.
func (r *ring) since(ms int64) []ChartPoint {
	out := make([]ChartPoint, 0, len(r.pts))
	for i := range r.pts {
		if p := r.pts[(r.start+i)%len(r.pts)]; p.T > ms {
			out = append(out, p)
		}
	}
	return out
}

// series is a ring and, for a rate, the counter of the last sample.
type series struct {
	ring
	last     uint64
	lastT    int64
	counting bool // last and lastT hold a sample
}

// rate adds the rate of counter since the last sample, if there was one.
func (s *series) rate(t int64, counter uint64, limit int) {
	if s.counting && t > s.lastT {
		d := 0.0
		if counter > s.last { // a cursor moved back counts as no delivery
			d = float64(counter - s.last)
		}
		s.push(ChartPoint{T: t, V: d * 1000 / float64(t-s.lastT)}, limit)
	}
	s.last, s.lastT, s.counting = counter, t, true
}

type seriesKey struct{ topic, group string }

// charts is the Handler's history.
type charts struct {
	limit int // points per series

	mu                sync.Mutex
	publish, deliver  map[string]*series
	lag               map[seriesKey]*series
	truncated         bool
	samples           int
	lastSample        int64
	intervalMs, winMs int64
}

func newCharts(window, interval time.Duration) *charts {
	return &charts{
		limit:      int(window/interval) + 1,
		publish:    make(map[string]*series),
		deliver:    make(map[string]*series),
		lag:        make(map[seriesKey]*series),
		intervalMs: interval.Milliseconds(),
		winMs:      window.Milliseconds(),
	}
}

// get returns the series of k in m, making it unless m is full.
func get[K comparable](c *charts, m map[K]*series, k K) *series {
	s := m[k]
	if s == nil {
		if len(m) >= MaxChartSeries {
			c.truncated = true
			return nil
		}
		s = &series{}
		m[k] = s
	}
	return s
}

// drop deletes the series of m with no point, or no sample, in the window.
func drop[K comparable](m map[K]*series, from int64) {
	for k, s := range m {
		newest := s.lastT
		if n := len(s.pts); n > 0 {
			newest = max(newest, s.pts[(s.start+n-1)%n].T)
		}
		if newest < from {
			delete(m, k)
		}
	}
}

// sample is what one sample read of a topic.
type topicSample struct {
	topic     string
	last      uint64 // last seq
	delivered uint64 // sum of the groups' committed cursors
	lags      map[string]uint64
}

// Sample reads every topic's last seq and its groups' cursors once and
// adds a point to each chart series. [Handler.Run] calls it every
// ChartInterval; a host that runs no Run may call it on its own schedule.
func (h *Handler) Sample(ctx context.Context) error {
	stats := h.stats()
	names, infos, err := h.topicInfos(ctx, stats)
	if err != nil {
		return err
	}
	charted := make(map[string]bool, len(h.cfg.ChartGroups))
	for _, g := range h.cfg.ChartGroups {
		charted[g] = true
	}
	samples := make([]topicSample, 0, len(names))
	for _, t := range names {
		ts := topicSample{topic: t, lags: make(map[string]uint64)}
		if info, ok := infos[t]; ok {
			ts.last = info.LastSeq
		} else if ts.last, err = h.bus.Store().Head(ctx, t); err != nil {
			return fmt.Errorf("ops: head of %q: %w", t, err)
		}
		groups, ginfos, err := h.groupInfos(ctx, t, stats)
		if err != nil {
			return err
		}
		for _, g := range groups {
			var cursor, lag uint64
			if gi, ok := ginfos[g]; ok {
				cursor, lag = gi.Cursor, gi.Lag
			} else {
				st, err := h.bus.GroupStatus(ctx, t, g)
				if err != nil {
					continue // not known yet
				}
				cursor, lag = st.Committed, st.Lag
			}
			ts.delivered += cursor
			if len(charted) == 0 || charted[t+"/"+g] {
				ts.lags[g] = lag
			}
		}
		samples = append(samples, ts)
	}
	now := h.cfg.Clock.Now().UnixMilli()
	c := h.charts
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ts := range samples {
		if s := get(c, c.publish, ts.topic); s != nil {
			s.rate(now, ts.last, c.limit)
		}
		if s := get(c, c.deliver, ts.topic); s != nil {
			s.rate(now, ts.delivered, c.limit)
		}
		for g, lag := range ts.lags {
			if s := get(c, c.lag, seriesKey{ts.topic, g}); s != nil {
				s.push(ChartPoint{T: now, V: float64(lag)}, c.limit)
				s.lastT = now
			}
		}
	}
	from := now - c.winMs
	drop(c.publish, from)
	drop(c.deliver, from)
	drop(c.lag, from)
	c.samples++
	c.lastSample = now
	return nil
}

// Run samples the charts every ChartInterval (the first sample at once)
// until ctx ends, and returns nil then. A failed sample is logged, and the
// next one is tried at its time. Without Run (or calls to
// [Handler.Sample]), /ops/charts has no points.
func (h *Handler) Run(ctx context.Context) error {
	timer := h.cfg.Clock.NewTimer(h.cfg.ChartInterval)
	defer timer.Stop()
	for {
		if err := h.Sample(ctx); err != nil && ctx.Err() == nil {
			h.cfg.Logger.Warn("ops: chart sample failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
			timer.Reset(h.cfg.ChartInterval)
		}
	}
}

// TopicChart is a topic's series in GET /ops/charts: publish and deliver
// rates, events/s.
type TopicChart struct {
	Topic   string       `json:"topic"`
	Publish []ChartPoint `json:"publish"`
	Deliver []ChartPoint `json:"deliver"`
}

// GroupChart is a group's lag series in GET /ops/charts.
type GroupChart struct {
	Topic string       `json:"topic"`
	Group string       `json:"group"`
	Lag   []ChartPoint `json:"lag"`
}

// ChartsResponse is the body of GET /ops/charts: the kept history, or
// with since the points after it, of the topics and groups the caller may
// inspect, sorted.
type ChartsResponse struct {
	WindowMs   int64 `json:"window_ms"`
	IntervalMs int64 `json:"interval_ms"`
	// Samples counts the samples taken since the Handler started;
	// LastSample is the time of the last one (Unix ms, 0 before the first).
	Samples    int          `json:"samples"`
	LastSample int64        `json:"last_sample"`
	Topics     []TopicChart `json:"topics"`
	Groups     []GroupChart `json:"groups"`
	// Truncated is set when more than MaxChartSeries topics or groups
	// were seen: the others are not charted.
	Truncated bool `json:"truncated,omitempty"`
}

// Charts returns the kept history of topic ("" for every topic) after
// since (Unix ms; 0 for all of it), filtered by show. It is the host's
// view with show nil.
func (h *Handler) Charts(topic string, since int64) ChartsResponse {
	return h.chartsOf(topic, since, everything)
}

func (h *Handler) chartsOf(topic string, since int64, show visible) ChartsResponse {
	c := h.charts
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := ChartsResponse{WindowMs: c.winMs, IntervalMs: c.intervalMs, Samples: c.samples, LastSample: c.lastSample,
		Topics: []TopicChart{}, Groups: []GroupChart{}, Truncated: c.truncated}
	want := func(t, g string) bool { return (topic == "" || t == topic) && show(t, g) }
	for t, pub := range c.publish {
		if !want(t, "") {
			continue
		}
		tc := TopicChart{Topic: t, Publish: pub.since(since), Deliver: []ChartPoint{}}
		if d := c.deliver[t]; d != nil {
			tc.Deliver = d.since(since)
		}
		resp.Topics = append(resp.Topics, tc)
	}
	for k, s := range c.lag {
		if want(k.topic, k.group) {
			resp.Groups = append(resp.Groups, GroupChart{Topic: k.topic, Group: k.group, Lag: s.since(since)})
		}
	}
	slices.SortFunc(resp.Topics, func(a, b TopicChart) int { return strings.Compare(a.Topic, b.Topic) })
	slices.SortFunc(resp.Groups, func(a, b GroupChart) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	return resp
}

func (h *Handler) chartsEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", false)
	if err != nil {
		return nil, err
	}
	since, err := p.uint("since", 0, 0, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	if err := h.ready(r, p, acl.Inspect, topic, ""); err != nil {
		return nil, err
	}
	return h.chartsOf(topic, int64(since), inspectable(r.Context())), nil
}
