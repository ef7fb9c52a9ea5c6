package event

import (
	"fmt"
	"sync/atomic"
	"time"
)

// entryState is where a read record is in its life in a group.
type entryState uint8

const (
	stFresh    entryState = iota // read, never delivered
	stInflight                   // delivered, lease running
	stWaiting                    // failed, waiting for its backoff
	stRetry                      // due for redelivery
	stDLQ                        // to be moved to the dead-letter topic
	stSettled                    // acked, dead-lettered or filtered out
	stDropped                    // given up with its partition
)

type entry struct {
	// d is the first delivery; its Record is the entry's record. Later
	// attempts get Delivery values of their own, so a handler's Delivery
	// never changes under it.
	d       Delivery
	part    *partState
	state   entryState
	dlqFail uint8 // failed publishes to the dead-letter topic
	attempt int
	// gen counts deliveries, attempts or not (see expire); started holds
	// the gen of the last delivery a handler goroutine started, or that
	// gen with takenBack when the group took it back before any did. A
	// handler goroutine and the group decide who was first with one
	// compare-and-swap (tryStart, takeBack): a delivery counts as an
	// attempt exactly when a handler runs it.
	gen     uint32
	started atomic.Uint32
	// dropped is set with state stDropped, for a handler goroutine to
	// skip a delivery given up with its partition without taking g.mu.
	dropped   atomic.Bool
	startedAt atomic.Int64 // Unix ns, written before started
	sub       *Subscription
	opts      *SubscribeOptions // of the subscription that delivered it last
	lease     time.Duration     // the AckTimeout of its last delivery
	deadline  time.Time         // lease end, backoff end or next dead-letter try
	reason    string
	hidx      int    // its index in the heap it is in (retry, waiting, the leases out of order), or -1
	lslot     uint32 // the tag of its lease's FIFO slot (see leaseQueue)
	lq        uint8  // where its lease is in the group's leaseQueue
}

// takenBack marks, in entry.started, a delivery the group took back
// before a handler goroutine started it. gen never reaches it.
const takenBack = 1 << 31

// tryStart marks delivery gen of e started at the Unix ns at, and
// reports whether it did: false when the group took it back first, or
// e was delivered again since. Called by a handler goroutine.
func (e *entry) tryStart(gen uint32, at int64) bool {
	for {
		cur := e.started.Load()
		switch {
		case cur == gen:
			return true
		case cur&^takenBack >= gen:
			return false // taken back, or a later delivery
		}
		e.startedAt.Store(at) // read only once started says gen
		if e.started.CompareAndSwap(cur, gen) {
			return true
		}
	}
}

// takeBack marks the current delivery of e, in flight, as taken back by
// the group, unless a handler goroutine started it already; it reports
// whether it did (then no handler will run it: it is no attempt). Called
// with g.mu held.
func (e *entry) takeBack() bool {
	for {
		cur := e.started.Load()
		switch cur {
		case e.gen:
			return false
		case e.gen | takenBack:
			return true
		}
		if e.started.CompareAndSwap(cur, e.gen|takenBack) {
			return true
		}
	}
}

// endLease takes an in-flight entry off its lease.
func (g *group) endLease(e *entry) {
	g.leases.remove(e)
	e.sub.inflight--
	e.part.inflight--
	g.nInflight--
}

func (g *group) settle(e *entry) {
	if e.part.draining {
		e.part.gs.note(e.d.Seq, settledMark) // advance may pop it above stopAt
	}
	e.state = stSettled
	g.unindex(e)
	if g.keyOrdered && e.d.Key != "" {
		g.keyDone(e)
	}
	e.part.advance()
	g.markDirty()
}

// markDirty schedules a cursor commit.
func (g *group) markDirty() {
	if !g.dirty {
		g.dirty = true
		g.signal()
	}
}

// drop gives e up without settling it: the cursor stays below it.
func (g *group) drop(e *entry) {
	if e.state == stInflight {
		e.takeBack() // a handler goroutine that has not started it never will
	}
	e.part.gs.note(e.d.Seq, startedAttempts(e))
	e.state = stDropped
	e.dropped.Store(true)
	g.unindex(e)
	if g.keyOrdered && e.d.Key != "" {
		g.keyDone(e)
	}
	if s := e.d.Seq - 1; s < e.part.stopAt {
		e.part.stopAt = s
	}
	e.part.advance()
}

// fail handles a nack or an expired lease: redeliver after a backoff, or
// dead-letter after the last attempt.
func (g *group) fail(e *entry, reason string, now time.Time) {
	e.reason = reason
	switch {
	case e.part.draining:
		g.drop(e)
	case e.attempt >= g.policy().MaxAttempts:
		g.toDLQ(e, now)
	default:
		e.state = stWaiting
		e.deadline = now.Add(g.policy().backoff(e.attempt))
		g.waiting.push(e)
		g.nHeld++
		if e.hidx == 0 {
			g.rearm(e.deadline) // the timer must be armed for the earlier deadline
		}
	}
}

// exhausted dead-letters e, which had its last attempt before it came
// back to the group (its subscriber left or its member changed): it is not
// delivered again.
func (g *group) exhausted(e *entry, s *Subscription, now time.Time) {
	e.opts = &s.opts
	if e.reason == "" {
		e.reason = fmt.Sprintf("%d attempts started, none settled", e.attempt)
	}
	g.toDLQ(e, now)
}

// unindex takes a settled or dropped e out of the id index.
func (g *group) unindex(e *entry) {
	if g.byID != nil && e.gen > 0 {
		delete(g.byID, e.d.ID)
	}
}

// unsettled returns the entries delivered at least once and not settled,
// of every partition, in no particular order. Each is in its partition's
// out list until it is settled or dropped. Called with g.mu held.
func (g *group) unsettled() []*entry {
	var es []*entry
	for _, p := range g.parts {
		for _, e := range p.out[p.head:] {
			if e.gen > 0 && e.state != stSettled && e.state != stDropped {
				es = append(es, e)
			}
		}
	}
	return es
}

// leased returns the in-flight entry of id if attempt is its current one.
func (g *group) leased(id string, attempt int) (*entry, error) {
	if attempt < 1 {
		return nil, invalid("attempt", "%d, want at least 1", attempt)
	}
	if g.byID == nil {
		g.byID = make(map[string]*entry)
		for _, e := range g.unsettled() {
			g.byID[e.d.ID] = e
		}
	}
	e := g.byID[id]
	if e == nil {
		return nil, fmt.Errorf("%w: id %q in group %q on %q", ErrNotInFlight, id, g.name, g.topic)
	}
	if e.state != stInflight || e.attempt != attempt {
		return nil, fmt.Errorf("%w: id %q attempt %d (now at attempt %d)", ErrStaleAck, id, attempt, e.attempt)
	}
	return e, nil
}

// currentEntry returns the in-flight entry of d if d's attempt is its current
// one, without a lookup by id.
func (g *group) currentEntry(d *Delivery) (*entry, error) {
	if e := d.e; e != nil {
		if e.state == stInflight && e.gen == d.gen {
			return e, nil
		}
		if e.state == stSettled || e.state == stDropped {
			return nil, fmt.Errorf("%w: id %q in group %q on %q", ErrNotInFlight, d.ID, g.name, g.topic)
		}
		return nil, fmt.Errorf("%w: id %q attempt %d (now at attempt %d)", ErrStaleAck, d.ID, d.Attempt, e.attempt)
	}
	return g.leased(d.ID, d.Attempt)
}

// outcome is what a handler or a client decides about a delivery.
type outcome struct {
	kind   outcomeKind
	reason string        // of a nack or a dead-letter
	extend time.Duration // of an extension
}

type outcomeKind uint8

const (
	outAck        outcomeKind = iota // settled
	outNack                          // redeliver after a backoff, or dead-letter after the last attempt
	outDeadLetter                    // dead-letter now
	outExtend                        // lease extended to now+extend
)

// conclude applies o to the current attempt of d. It is the one way a
// delivery is settled or extended: the methods of Delivery and of Bus and
// a handler's return value all come here. A d that no handler got (from
// [Bus.Ack] and its siblings) names the attempt by ID and Attempt only.
func (g *group) conclude(d *Delivery, o outcome) error {
	return g.concludeAt(d, o, time.Time{})
}

// concludeAt is conclude at time now, read by the caller; zero reads the
// clock.
func (g *group) concludeAt(d *Delivery, o outcome, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, err := g.currentEntry(d)
	if err != nil {
		return err
	}
	if now.IsZero() {
		now = g.b.clk.Now()
	}
	if e.part.leaseEnded(now) {
		// The member stalled past its lease on the partition: another
		// member may deliver the record now, and a settle here could not
		// be committed.
		return fmt.Errorf("%w: id %q attempt %d: the lease of partition %d ended", ErrStaleAck, d.ID, d.Attempt, e.part.id)
	}
	switch o.kind {
	case outAck:
		g.endLease(e)
		g.settle(e)
		g.b.obs.Acked(g.topic, g.name, now.Sub(time.UnixMilli(e.d.TS)))
		g.released(now)
	case outNack:
		g.endLease(e)
		g.b.obs.Nacked(g.topic, g.name)
		reason := o.reason
		if reason == "" {
			reason = "nacked"
		}
		g.fail(e, reason, now)
		g.released(now)
	case outDeadLetter:
		g.endLease(e)
		e.reason = o.reason
		g.toDLQ(e, now)
	case outExtend:
		e.deadline = now.Add(o.extend)
		g.leases.fix(e)
		g.rearm(e.deadline)
	}
	return nil
}

// released runs after a lease ended: deliver more, and read more if the
// buffer runs low.
func (g *group) released(now time.Time) {
	g.dispatch(now)
	if g.dataMaybe && len(g.fresh)-g.freshHead < g.b.cfg.ReadBatch/2 {
		g.signal()
	}
}

// expire ends the leases that ran out and moves due retries to the ready heap.
func (g *group) expire(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for e := g.leases.peek(); e != nil && !e.deadline.After(now); e = g.leases.peek() {
		if e.started.Load() != e.gen {
			// It waited in its subscription's queue all along: no handler
			// saw it, so this is no attempt. While the subscription's
			// handlers make progress it keeps its place in the queue;
			// otherwise it goes back to the group, for a subscription with
			// room, unless a handler goroutine starts it first.
			s := e.sub
			if !s.paused && !s.closing && now.Sub(time.Unix(0, s.lastStart.Load())) < e.lease {
				e.deadline = now.Add(e.lease)
				g.leases.fix(e)
				continue
			}
			if e.takeBack() {
				if !s.paused && !s.closing && !s.stalled.Load() {
					s.stalled.Store(true) // its partitions go to the others
					g.assign()
				}
				g.endLease(e)
				e.attempt--
				e.state = stRetry
				g.retry.push(e)
				g.nHeld++
				continue
			}
			// A handler goroutine started it just now: an attempt.
		}
		// The lease counts from when the handler started.
		if end := time.Unix(0, e.startedAt.Load()).Add(e.lease); end.After(now) {
			e.deadline = end
			g.leases.fix(e)
			continue
		}
		g.endLease(e)
		g.b.obs.Expired(g.topic, g.name)
		g.fail(e, "ack deadline exceeded", now)
	}
	for e := g.waiting.peek(); e != nil && !e.deadline.After(now); e = g.waiting.peek() {
		g.waiting.pop()
		e.state = stRetry
		g.retry.push(e)
	}
	g.dispatch(now)
}
