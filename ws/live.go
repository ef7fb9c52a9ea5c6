package ws

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/internal/wsframe"
)

// Live subscriptions (SUBSCRIBE without group; docs/PROTOCOL.md, "Live
// subscriptions").
//
// The gateway follows each topic that has live subscribers with one reader
// goroutine (a topicFeed): it waits on Bus.Watch (and a poll timer) and
// reads the store from its position on, encodes each record's EVENT frame
// once, and hands the frames, under the topic's lock, to every
// subscriber's connection: a pointer to the shared bytes goes on the
// connection's live queue (conn.lq), which the connection's writer
// empties. Nothing blocks the reader: a connection whose live queue is full
// (Config.LiveQueueEvents, Config.LiveQueueBytes) is closed with
// wsproto.CloseSlowSubscriber, or, with slow "skip", the subscription's queued
// frames are dropped and a GAP with reason "slow" takes their place.
//
// A subscription joins the feed at the feed's position P, under the
// topic's lock: from then on the frames after P are kept for it (in its
// pending buffer, counted against the same bounds) until it is started.
// It is started once the OK of its SUBSCRIBE is queued, and for a
// SUBSCRIBE with since, once what the store holds in (since, P] has been
// queued behind that OK: the pending frames then follow, so that nothing is
// missed or sent twice at the switch. The recovery reads run in a
// goroutine of the connection that ends with them; an idle live
// subscription holds no goroutine.

// liveReadBatch is how many records a feed or a recovery reads at once.
const liveReadBatch = 256

// liveTakeBytes bounds the bytes of live frames the writer takes at once.
const liveTakeBytes = 64 << 10

// liveFrame is a frame of a topic's live stream: an EVENT (from and to
// are its seq) or a GAP of the seqs from..to. The bytes of a feed's frames
// are encoded once and shared by every queue that holds them; b is nil for
// a GAP of one subscription (reason slow, or a deleted range cut to what
// it has not seen), which the writer encodes.
type liveFrame struct {
	b        []byte
	from, to uint64
	reason   string // a GAP's; "" for an EVENT
}

// liveItem is a frame on a connection's live queue.
type liveItem struct {
	sub *liveSub
	f   *liveFrame
}

// liveSub is a live subscription of a connection.
type liveSub struct {
	c     *conn
	feed  *topicFeed
	topic string
	skip  bool // slow "skip"; else "close"

	idx int // in feed.subs, -1 once left; guarded by feed.mu

	closed atomic.Bool // unsubscribed, or its connection ended

	// Guarded by c.qmu.
	started bool         // frames go on c.lq; before, on pending
	after   uint64       // frames up to this seq are not for it
	pending []*liveFrame // frames after P, kept until it starts
	queued  int          // its frames on c.lq and pending
	gap     *liveFrame   // its slow GAP, queued and not taken yet
	stop    context.CancelFunc
}

// topicFeed follows one topic for the gateway's live subscribers.
type topicFeed struct {
	g      *Gateway
	topic  string
	ctx    context.Context // ends when the last subscriber leaves
	cancel context.CancelFunc

	mu     sync.Mutex // the topic's lock
	pos    uint64     // the last seq handed to subscribers; written by run
	subs   []*liveSub
	closed bool // stopped, or could not start: look the topic up again
}

// joinLive registers s with the feed of its topic (starting the feed for
// the first subscriber) and returns the feed's position: s gets the frames
// after it.
func (g *Gateway) joinLive(ctx context.Context, s *liveSub) (uint64, *wsproto.Error) {
	for {
		g.lmu.Lock()
		f := g.feeds[s.topic]
		created := f == nil
		if created {
			f = &topicFeed{g: g, topic: s.topic}
			f.ctx, f.cancel = context.WithCancel(context.Background())
			f.mu.Lock() // held until it has its position
			g.feeds[s.topic] = f
		}
		g.lmu.Unlock()
		if created {
			if err := f.start(ctx); err != nil {
				f.closed = true
				f.mu.Unlock()
				f.cancel()
				g.forgetFeed(f)
				return 0, errorOf(err, wsproto.CodeInternal)
			}
		} else {
			f.mu.Lock()
		}
		if f.closed {
			f.mu.Unlock()
			continue // its last subscriber left meanwhile: start another
		}
		if limit := g.cfg.MaxLiveSubscribers; limit > 0 && len(f.subs) >= limit {
			f.mu.Unlock()
			return 0, wsproto.NewError(wsproto.CodeRateLimited, nil, "topic %q has %d live subscribers, the limit", s.topic, len(f.subs))
		}
		s.feed, s.idx = f, len(f.subs)
		f.subs = append(f.subs, s)
		pos := f.pos
		s.after = pos // not yet seen by the reader: no lock needed
		f.mu.Unlock()
		g.obs.LiveSubscribers(s.topic, 1)
		return pos, nil
	}
}

// forgetFeed removes f from the gateway's feeds.
func (g *Gateway) forgetFeed(f *topicFeed) {
	g.lmu.Lock()
	if g.feeds[f.topic] == f {
		delete(g.feeds, f.topic)
	}
	g.lmu.Unlock()
}

// start reads the topic's head, the feed's first position, and starts its
// reader. Called with f.mu held.
func (f *topicFeed) start(ctx context.Context) error {
	g := f.g
	// Watch before reading the head: an append in between wakes the
	// reader, which reads from the head on anyway.
	wake, unwatch := g.bus.Watch(f.topic)
	head, err := g.bus.Store().Head(ctx, f.topic)
	if err != nil {
		unwatch()
		return err
	}
	f.pos = head
	g.lwg.Add(1)
	go f.run(wake, unwatch)
	return nil
}

// leave removes s from its feed; the feed stops with its last subscriber.
func (s *liveSub) leave() {
	f := s.feed
	if f == nil {
		return
	}
	f.mu.Lock()
	left := s.idx >= 0
	if left {
		last := len(f.subs) - 1
		f.subs[s.idx] = f.subs[last]
		f.subs[s.idx].idx = s.idx
		f.subs[last] = nil
		f.subs = f.subs[:last]
		s.idx = -1
	}
	stop := len(f.subs) == 0 && !f.closed
	if stop {
		f.closed = true
	}
	if cap(f.subs) > 64 && len(f.subs) < cap(f.subs)/4 {
		f.subs = append([]*liveSub(nil), f.subs...) // do not keep a crowd's slice
	}
	f.mu.Unlock()
	if left {
		f.g.obs.LiveSubscribers(s.topic, -1)
	}
	if stop {
		f.cancel()
		f.g.forgetFeed(f)
	}
}

// run follows the topic: it reads what was appended after its position,
// hands it to the subscribers, and waits for the next append (a wake-up
// of Bus.Watch, or the poll interval for appends the bus does not see).
func (f *topicFeed) run(wake <-chan struct{}, unwatch func()) {
	g := f.g
	defer g.lwg.Done()
	defer unwatch()
	timer := g.cfg.Clock.NewTimer(g.cfg.LivePollInterval)
	defer timer.Stop()
	store := g.bus.Store()
	busDone := g.bus.Done()
	var scratch []byte
	for {
		if f.ctx.Err() != nil {
			return
		}
		recs, err := store.Read(f.ctx, f.topic, f.pos, liveReadBatch)
		switch {
		case err != nil:
			if f.ctx.Err() != nil {
				return
			}
			g.log.Warn("ws: live: reading the topic failed; trying again", "topic", f.topic, "after", f.pos, "err", err)
		case len(recs) > 0:
			scratch = f.publish(recs, scratch)
			if len(recs) == liveReadBatch {
				continue // there may be more
			}
		}
		timer.Reset(g.cfg.LivePollInterval)
		select {
		case <-f.ctx.Done():
			return
		case <-busDone:
			// Nothing more comes; the gateway closes its connections.
			f.mu.Lock()
			f.closed = true
			f.mu.Unlock()
			g.forgetFeed(f)
			return
		case <-wake:
		case <-timer.C():
		}
	}
}

// publish encodes recs (read after f.pos) once, with a GAP "deleted" for
// each hole in their seqs, and hands the frames to every subscriber.
func (f *topicFeed) publish(recs []event.Record, scratch []byte) []byte {
	frames := make([]*liveFrame, 0, len(recs))
	next := f.pos + 1
	for i := range recs {
		r := &recs[i]
		if r.Seq < next {
			continue // a store must not show it again; never send it twice
		}
		if r.Seq > next {
			scratch = wsframe.AppendGap(scratch[:0], f.topic, next, r.Seq-1, wsproto.GapDeleted)
			frames = append(frames, &liveFrame{b: append([]byte(nil), scratch...), from: next, to: r.Seq - 1, reason: wsproto.GapDeleted})
		}
		scratch = wsframe.AppendLiveEvent(scratch[:0], f.topic, r)
		frames = append(frames, &liveFrame{b: append([]byte(nil), scratch...), from: r.Seq, to: r.Seq})
		next = r.Seq + 1
	}
	if cap(scratch) > 64<<10 {
		scratch = nil // do not keep a large record's buffer
	}
	if len(frames) == 0 {
		return scratch
	}
	f.mu.Lock()
	for _, s := range f.subs {
		s.deliver(frames)
	}
	f.pos = next - 1
	f.mu.Unlock()
	return scratch
}

// deliver queues frames for s, without waiting. Called by the feed's
// reader with the topic's lock held.
func (s *liveSub) deliver(frames []*liveFrame) {
	c := s.c
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.ended || c.liveDead.Load() || s.closed.Load() {
		return
	}
	for _, fr := range frames {
		if fr = s.cut(fr); fr == nil {
			continue
		}
		if !c.liveRoom(fr) && !s.overflow(fr) {
			return // the connection is being closed
		}
		if s.gap != nil && s.gap.to >= fr.to {
			continue // the slow GAP covers it
		}
		s.push(fr)
	}
	c.startWriter()
}

// cut returns fr without the seqs up to s.after: nil when it has none
// left, a GAP of its own when a GAP covers some. Called with c.qmu held.
func (s *liveSub) cut(fr *liveFrame) *liveFrame {
	switch {
	case fr.to <= s.after:
		return nil
	case fr.from <= s.after:
		return &liveFrame{from: s.after + 1, to: fr.to, reason: fr.reason}
	}
	return fr
}

// push puts fr on the live queue (or, before s starts, on its pending
// frames). Called with c.qmu held.
func (s *liveSub) push(fr *liveFrame) {
	c := s.c
	if s.started {
		c.lq = append(c.lq, liveItem{sub: s, f: fr})
	} else {
		s.pending = append(s.pending, fr)
	}
	s.queued++
	c.lqN++
	c.lqBytes += len(fr.b)
}

// liveRoom reports whether fr fits in the live queue of c; a frame always
// fits an empty queue, however large. Called with c.qmu held.
func (c *conn) liveRoom(fr *liveFrame) bool {
	cfg := &c.g.cfg
	return c.lqN == 0 || (c.lqN < cfg.LiveQueueEvents && c.lqBytes+len(fr.b) <= cfg.LiveQueueBytes)
}

// overflow handles a frame of s that does not fit: with slow "close" the
// connection is closed (false: deliver nothing more to it); with "skip" the
// frames of s still queued are dropped and a GAP "slow" of theirs and of
// fr's seqs takes their place. Called with c.qmu held.
func (s *liveSub) overflow(fr *liveFrame) bool {
	c := s.c
	if !s.skip {
		c.liveDead.Store(true)
		c.dropLiveLocked()
		c.g.obs.LiveDropped(s.topic, wsproto.SlowClose)
		c.g.log.Debug("ws: live subscriber too slow; closing", "conn", c.id, "topic", s.topic)
		c.spawnLocked(func() { c.closeWith(wsproto.CloseSlowSubscriber, "live subscriber too slow") })
		return false
	}
	from := s.dropQueued()
	if s.gap != nil {
		s.gap.to = fr.to // still queued: it grows over what was behind it
	} else {
		if from == 0 {
			from = fr.from
		}
		s.gap = &liveFrame{from: from, to: fr.to, reason: wsproto.GapSlow}
		s.push(s.gap)
	}
	c.g.obs.LiveDropped(s.topic, wsproto.SlowSkip)
	return true
}

// dropQueued drops the queued frames of s but its slow GAP and returns the
// first seq they held (0 for none). Called with c.qmu held.
func (s *liveSub) dropQueued() (from uint64) {
	c := s.c
	keep := func(fr *liveFrame) bool {
		if fr == s.gap {
			return true
		}
		if from == 0 {
			from = fr.from
		}
		s.queued--
		c.lqN--
		c.lqBytes -= len(fr.b)
		return false
	}
	if !s.started {
		out := s.pending[:0]
		for _, fr := range s.pending {
			if keep(fr) {
				out = append(out, fr)
			}
		}
		clear(s.pending[len(out):])
		s.pending = out
		return from
	}
	if s.queued == 0 {
		return 0
	}
	q := c.lq[c.lqhead:]
	out := q[:0]
	for _, it := range q {
		if it.sub != s || keep(it.f) {
			out = append(out, it)
		}
	}
	clear(q[len(out):])
	c.lq = c.lq[:c.lqhead+len(out)]
	return from
}

// dropLiveLocked empties the live queue of c, whose connection is being
// closed (c.liveDead): nothing is queued for it any more, and pending
// frames go with their subscriptions. Called with c.qmu held.
func (c *conn) dropLiveLocked() {
	clear(c.lq)
	c.lq, c.lqhead = nil, 0
}

// startLive starts s: its pending frames (all after P) go on the live
// queue, without those up to after (what the client has). From now on the
// reader's frames go there directly.
func (s *liveSub) startLive(after uint64) {
	c := s.c
	c.qmu.Lock()
	defer c.qmu.Unlock()
	pending := s.pending
	s.pending, s.queued = nil, 0
	for _, fr := range pending {
		c.lqN--
		c.lqBytes -= len(fr.b)
	}
	if s.gap != nil && !containsFrame(pending, s.gap) {
		s.gap = nil
	}
	s.started = true
	s.after = max(s.after, after)
	if c.ended || c.liveDead.Load() || s.closed.Load() {
		return
	}
	for _, fr := range pending {
		if fr == s.gap {
			if fr.to <= s.after {
				s.gap = nil
				continue
			}
			fr.from = max(fr.from, s.after+1)
		} else if fr = s.cut(fr); fr == nil {
			continue
		}
		s.push(fr)
	}
	c.startWriter()
}

func containsFrame(fs []*liveFrame, f *liveFrame) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// endLive ends s: the reader hands it nothing more, its queued frames are
// dropped, and a recovery under way stops.
func (s *liveSub) endLive() {
	if s.closed.Swap(true) {
		return
	}
	s.leave()
	c := s.c
	c.qmu.Lock()
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	s.gap = nil // so that dropQueued drops it too
	if !c.ended && !c.liveDead.Load() {
		s.dropQueued()
	}
	s.pending = nil
	c.qmu.Unlock()
}

// liveSubscribe handles a SUBSCRIBE without group.
func (c *conn) liveSubscribe(f *wsframe.Frame) *wsproto.Error {
	o := f.Opts
	if o == nil {
		o = &wsframe.FrameOpts{}
	}
	s := &liveSub{c: c, topic: f.Topic, skip: o.Slow == wsproto.SlowSkip, idx: -1}
	p, perr := c.g.joinLive(c.ctx, s)
	if perr != nil {
		if c.ctx.Err() != nil {
			return nil
		}
		return perr
	}
	c.mu.Lock()
	c.live = append(c.live, s)
	c.mu.Unlock()

	if o.Since == nil {
		c.liveOK(f.Corr, p, okLive)
		s.startLive(p)
		return nil
	}
	since := uint64(*o.Since)
	rec, perr := c.recoverFrom(s, since, p)
	if perr != nil {
		c.dropLive(s)
		if c.ctx.Err() != nil {
			return nil
		}
		return perr
	}
	ok := okRecovered
	if rec.seq != since {
		ok = okNotRecovered
	}
	c.liveOK(f.Corr, rec.seq, ok)
	if rec.seq > since {
		c.queueGap(c.ctx, s, since+1, rec.seq, wsproto.GapDeleted)
	}
	if rec.seq >= p {
		s.startLive(rec.seq)
		return nil
	}
	// Read (rec.seq, p] in a goroutine of the connection, which ends with
	// it: the reader goroutine goes on reading the client's frames (and so
	// its pongs) meanwhile.
	ctx, cancel := context.WithCancel(c.ctx)
	c.qmu.Lock()
	s.stop = cancel
	c.qmu.Unlock()
	if !c.spawn(func() {
		defer cancel()
		c.recoverLive(ctx, s, rec, p)
	}) {
		cancel()
	}
	return nil
}

// recovery is where a SUBSCRIBE with since starts: seq is the last seq it
// does not deliver (since, or above since when the store no longer holds
// since+1), recs the first records after seq that the store holds.
type recovery struct {
	seq  uint64
	recs []event.Record
}

// recoverFrom finds where a SUBSCRIBE with since starts, p being the
// feed's position at which s joined.
func (c *conn) recoverFrom(s *liveSub, since, p uint64) (recovery, *wsproto.Error) {
	g := c.g
	st := g.bus.Store()
	if since >= p {
		// The client has seen what the feed has not read yet (another
		// gateway over the same store was ahead), or more than the topic
		// has ever held (a position of another store): then it starts at
		// the topic's head.
		if since > p {
			head, err := st.Head(c.ctx, s.topic)
			if err != nil {
				return recovery{}, errorOf(err, wsproto.CodeInternal)
			}
			return recovery{seq: min(since, max(head, p))}, nil
		}
		return recovery{seq: since}, nil
	}
	start := since
	if pr, ok := st.(event.Pruner); ok {
		floor, err := pr.Floor(c.ctx, s.topic)
		if err != nil {
			return recovery{}, errorOf(err, wsproto.CodeInternal)
		}
		if floor > start+1 {
			start = min(floor-1, p) // retention deleted what is below the floor
		}
	}
	if start == p {
		return recovery{seq: p}, nil
	}
	recs, err := st.Read(c.ctx, s.topic, start, liveReadBatch)
	if err != nil {
		return recovery{}, errorOf(err, wsproto.CodeInternal)
	}
	switch {
	case len(recs) == 0 || recs[0].Seq > p:
		return recovery{seq: p}, nil // deleted up to p
	case recs[0].Seq > start+1:
		start = recs[0].Seq - 1 // deleted from start+1 on
	}
	return recovery{seq: start, recs: recs}, nil
}

// recoverLive queues the records of (rec.seq, p] behind the OK, waiting
// for room in the send queue (the client's reading paces it), with a GAP
// "deleted" for each range the store no longer holds, then starts s.
func (c *conn) recoverLive(ctx context.Context, s *liveSub, rec recovery, p uint64) {
	g := c.g
	next, recs, n := rec.seq+1, rec.recs, 0
	defer func() { g.obs.LiveRecovered(s.topic, n) }()
	for past := false; next <= p && !past; {
		for i := range recs {
			r := &recs[i]
			if past = r.Seq > p; past {
				break // the feed hands it over
			}
			if r.Seq < next {
				continue
			}
			if r.Seq > next && !c.queueGap(ctx, s, next, r.Seq-1, wsproto.GapDeleted) {
				return
			}
			f := framePool.Get().(*outFrame)
			f.op, f.live, f.rec = wsproto.OpEvent, s, r
			if !c.enqueue(ctx, f) {
				return
			}
			n++
			next = r.Seq + 1
		}
		if past || next > p || len(recs) < liveReadBatch {
			break
		}
		var err error
		if recs, err = g.bus.Store().Read(ctx, s.topic, next-1, liveReadBatch); err != nil {
			if ctx.Err() == nil {
				g.log.Warn("ws: live: recovery read failed; ending the subscription", "conn", c.id, "topic", s.topic, "err", err)
				c.endLiveWithErr(s, wsproto.NewError(wsproto.CodeInternal, err, "live subscription of topic %q ended: reading the topic failed: %v", s.topic, err))
			}
			return
		}
	}
	if next <= p && !c.queueGap(ctx, s, next, p, wsproto.GapDeleted) {
		return
	}
	c.qmu.Lock()
	s.stop = nil
	c.qmu.Unlock()
	s.startLive(p)
}

// queueGap queues a GAP of s on the send queue (behind its OK and the
// recovered EVENTs), waiting for room until ctx ends.
func (c *conn) queueGap(ctx context.Context, s *liveSub, from, to uint64, reason string) bool {
	f := framePool.Get().(*outFrame)
	f.op, f.live, f.seq, f.to, f.msg = wsproto.OpGap, s, from, to, reason
	return c.enqueue(ctx, f)
}

// The OK of a live SUBSCRIBE (outFrame.liveOK).
const (
	okPlain        int8 = iota // not a live SUBSCRIBE's
	okLive                     // without since
	okRecovered                // with since, recovered true
	okNotRecovered             // with since, recovered false
)

// liveOK answers a live SUBSCRIBE.
func (c *conn) liveOK(corr json.RawMessage, seq uint64, kind int8) {
	f := framePool.Get().(*outFrame)
	f.op, f.corr, f.seq, f.liveOK = wsproto.OpOK, corr, seq, kind
	c.answer(f)
}

// liveSub returns the live subscription of topic on c, nil if none.
func (c *conn) liveSub(topic string) *liveSub {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.live {
		if s.topic == topic {
			return s
		}
	}
	return nil
}

// dropLive ends s and removes it from c.
func (c *conn) dropLive(s *liveSub) {
	c.mu.Lock()
	for i, x := range c.live {
		if x == s {
			c.live = append(c.live[:i], c.live[i+1:]...)
			break
		}
	}
	if len(c.live) == 0 {
		c.live = nil
	}
	c.mu.Unlock()
	s.endLive()
}

// endLiveWithErr ends s with an ERR that names its topic.
func (c *conn) endLiveWithErr(s *liveSub, e *wsproto.Error) {
	c.dropLive(s)
	out := framePool.Get().(*outFrame)
	out.op, out.code, out.msg, out.topic = wsproto.OpErr, e.Code, e.Msg, s.topic
	c.answer(out)
}

// liveSnapshot returns the live subscriptions of c.
func (c *conn) liveSnapshot() []*liveSub {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*liveSub(nil), c.live...)
}

// liveTopics returns how many topics the gateway follows for live
// subscribers.
func (g *Gateway) liveTopics() int {
	g.lmu.Lock()
	defer g.lmu.Unlock()
	return len(g.feeds)
}
