package mongostore

import (
	"context"
	"slices"
	"time"

	"github.com/promethean/promlib/event"
)

// recentCache holds the recent records of one topic: every record the
// topic has with a seq in (lo, hi], in seq order. A range enters it only
// when it is known exactly: records this store just inserted at head+1..
// (an insert there succeeds only if no other writer holds those seqs), or
// the result of a read from the server. So serving a read from it shows
// what a read from the server would have shown, and never a gap that fills
// in later.
//
// Records can be deleted by a Prune, in any process, so a record is served
// from the cache only if no Prune can have deleted it: Prune deletes only
// records with ts < before, and first raises the topic's prune horizon
// (the highest before any Prune announced) and then waits 2*horizonTrust
// before it deletes anything. A horizon read from the server less than
// horizonTrust ago (measured from when the read was sent) is therefore
// still a bound for every deletion done by now: a cached record with ts at
// or above it still exists. Records below it are read from the server.
type recentCache struct {
	lo, hi uint64
	recs   []event.Record
	bytes  int

	horizon   int64     // the topic's prune horizon, as last read
	horizonAt time.Time // when that read was sent; zero: never read
}

// reset empties the cache.
func (c *recentCache) reset() {
	c.lo, c.hi, c.bytes = 0, 0, 0
	clear(c.recs)
	c.recs = c.recs[:0]
}

// read returns the records in (after, hi], at most limit, and whether
// after lies in the cached range.
func (c *recentCache) read(after uint64, limit int) ([]event.Record, bool) {
	if c == nil || after < c.lo || after > c.hi || c.lo == c.hi {
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(c.recs, after+1, func(r event.Record, seq uint64) int {
		switch {
		case r.Seq < seq:
			return -1
		case r.Seq > seq:
			return 1
		}
		return 0
	})
	n := min(limit, len(c.recs)-i)
	return slices.Clone(c.recs[i : i+n]), true
}

// add records that the topic holds exactly recs (in seq order) in
// (from, to]. A range that neither touches nor overlaps the cached one
// replaces it if it is newer.
func (c *recentCache) add(from, to uint64, recs []event.Record, maxRecs, maxBytes int) {
	if to <= from {
		return
	}
	empty := c.lo == 0 && c.hi == 0 && len(c.recs) == 0
	switch {
	case empty || from > c.hi || from <= c.lo && to >= c.hi:
		// New, newer and disjoint, or a superset: take it whole.
		c.lo, c.hi, c.bytes = from, to, 0
		clear(c.recs)
		c.recs = append(c.recs[:0], recs...)
		for i := range c.recs {
			c.bytes += recSize(&c.recs[i])
		}
	case to > c.hi:
		// Extends the top.
		for i := range recs {
			if recs[i].Seq > c.hi {
				c.recs = append(c.recs, recs[i])
				c.bytes += recSize(&recs[i])
			}
		}
		c.hi = to
	case from < c.lo && to >= c.lo:
		// Extends the bottom.
		var older []event.Record
		for i := range recs {
			if recs[i].Seq <= c.lo {
				older = append(older, recs[i])
				c.bytes += recSize(&recs[i])
			}
		}
		c.recs = append(older, c.recs...)
		c.lo = from
	default:
		return // older and disjoint, or inside: nothing new
	}
	c.trim(maxRecs, maxBytes)
}

// trim drops the oldest records when the cache is over its bounds, down
// to three quarters of them, so that trimming costs O(1) per record.
func (c *recentCache) trim(maxRecs, maxBytes int) {
	if len(c.recs) <= maxRecs && c.bytes <= maxBytes {
		return
	}
	k := 0
	for k < len(c.recs) && (len(c.recs)-k > maxRecs*3/4 || c.bytes > maxBytes*3/4) {
		c.bytes -= recSize(&c.recs[k])
		c.lo = c.recs[k].Seq
		k++
	}
	n := copy(c.recs, c.recs[k:])
	clear(c.recs[n:])
	c.recs = c.recs[:n]
}

// cloneRecord returns a deep copy of r, which the cache may keep.
func cloneRecord(r *event.Record) event.Record {
	c := *r
	c.Payload = slices.Clone(r.Payload)
	c.CausedBy = slices.Clone(r.CausedBy)
	c.Tags = slices.Clone(r.Tags)
	if r.Headers != nil {
		c.Headers = make(map[string]string, len(r.Headers))
		for k, v := range r.Headers {
			c.Headers[k] = v
		}
	}
	return c
}

// cacheRead reads (after, ...] from the cache of topic. complete reports
// that nothing beyond the returned records is known to exist: the cache
// reaches the topic's head as last seen by this store's appends and its
// poller, which is running (so a newer head shows up within PollInterval).
func (s *Store) cacheRead(topic string, after uint64, limit int) (recs []event.Record, next uint64, ok, complete bool) {
	if s.cfg.CacheRecords < 0 {
		return nil, after, false, false
	}
	head, watched := s.hub.Polled(topic)
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	c := s.caches[topic]
	recs, ok = c.read(after, limit)
	if !ok {
		return nil, after, false, false
	}
	next = c.hi
	if len(recs) == limit {
		next = recs[len(recs)-1].Seq
	}
	return recs, next, true, watched && c.hi >= head
}

// cacheAdd records that topic holds exactly recs in (from, to]; recs must
// not be shared with callers.
func (s *Store) cacheAdd(topic string, from, to uint64, recs []event.Record) {
	if s.cfg.CacheRecords < 0 || to <= from {
		return
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	c := s.caches[topic]
	if c == nil {
		c = &recentCache{}
		s.caches[topic] = c
	}
	c.add(from, to, recs, s.cfg.CacheRecords, s.cfg.CacheBytes)
}

// horizonTrust is how long a prune horizon read from the server bounds the
// deletions of every Prune; Prune waits twice as long after raising it.
// Every process sharing a store must use the same value.
const horizonTrust = 250 * time.Millisecond

// cacheHorizon returns a prune horizon of topic read less than horizonTrust
// ago, reading it from the server if the cached one is older.
func (s *Store) cacheHorizon(ctx context.Context, topic string) (int64, error) {
	s.cacheMu.Lock()
	c := s.caches[topic]
	if c != nil && !c.horizonAt.IsZero() && time.Since(c.horizonAt) < horizonTrust {
		h := c.horizon
		s.cacheMu.Unlock()
		return h, nil
	}
	s.cacheMu.Unlock()
	sent := time.Now()
	d, err := s.topicDoc(ctx, topic)
	if err != nil {
		return 0, err
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if c := s.caches[topic]; c != nil && sent.After(c.horizonAt) {
		c.horizon, c.horizonAt = d.Horizon, sent
	}
	return d.Horizon, nil
}

// cacheDrop empties the cache of topic (this store pruned it).
func (s *Store) cacheDrop(topic string) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if c := s.caches[topic]; c != nil {
		c.reset()
	}
}

func recSize(r *event.Record) int {
	n := 96 + len(r.ID) + len(r.Key) + len(r.Payload) + len(r.SID)
	for k, v := range r.Headers {
		n += len(k) + len(v) + 16
	}
	return n
}
