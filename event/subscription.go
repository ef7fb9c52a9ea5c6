package event

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Delivery is one delivery of a record to a subscription. Settle it with
// exactly one of Ack or Nack (or let the handler's return value do it);
// ModAck extends its lease.
type Delivery struct {
	Record
	DeliveryContext
	// Group is the consumer group the record was delivered to.
	Group string

	g     *group
	e     *entry
	gen   uint32        // which delivery of e this is
	lease time.Duration // the group's AckTimeout when it was delivered
}

// Ack settles the delivery. It returns ErrStaleAck when the lease of this
// attempt has ended (the record may be in flight elsewhere now) and
// ErrNotInFlight when it is already settled.
func (d *Delivery) Ack(ctx context.Context) error {
	if d.g == nil {
		return errNotFromBus
	}
	return d.g.conclude(d, outcome{kind: outAck})
}

// errNotFromBus is returned by the methods of a Delivery that no Bus made.
var errNotFromBus = fmt.Errorf("%w: the delivery was not made by a Bus", ErrNotInFlight)

// Nack ends the delivery unsuccessfully: the record is redelivered after a
// backoff, or dead-lettered with reason after the last attempt.
func (d *Delivery) Nack(ctx context.Context, reason string) error {
	if d.g == nil {
		return errNotFromBus
	}
	return d.g.conclude(d, outcome{kind: outNack, reason: reason})
}

// ModAck extends the lease of the delivery to now+extend.
func (d *Delivery) ModAck(ctx context.Context, extend time.Duration) error {
	if extend <= 0 {
		return invalid("extend", "%v, want a positive duration", extend)
	}
	if d.g == nil {
		return errNotFromBus
	}
	return d.g.conclude(d, outcome{kind: outExtend, extend: extend})
}

// DeadLetter settles the delivery by moving the record to the dead-letter
// topic now, with reason, whatever attempt this is: for failures that no
// retry can mend, such as a payload that does not decode.
func (d *Delivery) DeadLetter(ctx context.Context, reason string) error {
	if d.g == nil {
		return errNotFromBus
	}
	return d.g.conclude(d, outcome{kind: outDeadLetter, reason: reason})
}

// Start marks the start of the attempt of a delivery of a subscription
// with [SubscribeOptions.DeferStart]: the attempt counts, and its lease
// (Deadline) runs, from now. It reports whether d is still in flight; if
// it is not (it waited past its lease, its subscription closed), d must not
// be processed: it went back to the group, and this was no attempt. For
// other subscriptions the handler's call was the start, and Start only
// reports whether d is still in flight.
func (d *Delivery) Start() bool {
	g := d.g
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e, err := g.currentEntry(d)
	if err != nil {
		return false
	}
	if !e.opts.DeferStart || e.started.Load() == d.gen {
		return true
	}
	now := g.b.clk.Now()
	if !e.tryStart(d.gen, now.UnixNano()) {
		return false // taken back by the group
	}
	e.sub.lastStart.Store(now.UnixNano())
	d.Deadline = now.Add(d.lease)
	return true
}

// Subscription is one subscriber of a consumer group. Close it to leave.
type Subscription struct {
	g    *group
	h    Handler
	opts SubscribeOptions

	// guarded by g.mu
	batch    []*Delivery // delivered by the running dispatch, to enqueue
	inflight int
	paused   bool
	closing  bool
	// stalled is set when its handlers made no progress for an AckTimeout
	// and its queue went back to the group; it serves no partition until a
	// handler returns.
	stalled atomic.Bool

	lastStart atomic.Int64 // when a handler goroutine last picked up a delivery, Unix ns

	qmu     sync.Mutex
	queue   []*Delivery
	qhead   int
	qclosed bool
	workers int // handler goroutines running; they run only while the queue has deliveries

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	done   chan struct{}
	err    error

	// The companion that consumes the group's redrive topic (see
	// redrive.go), and for a companion the topic it redrives.
	redriveOf string
	rmu       sync.Mutex
	redrive   *Subscription
	rclosed   bool
}

// companion returns the redrive companion of s, if any.
func (s *Subscription) companion() *Subscription {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.redrive
}

func newSubscription(g *group, h Handler, o SubscribeOptions, redriveOf string) *Subscription {
	if redriveOf == "" {
		h = chainDelivery(h, g.b.cfg.DeliveryInterceptors)
	}
	s := &Subscription{g: g, h: h, opts: o, done: make(chan struct{}), redriveOf: redriveOf}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Topic returns the subscribed topic.
func (s *Subscription) Topic() string { return s.g.topic }

// Group returns the consumer group.
func (s *Subscription) Group() string { return s.g.name }

// Options returns the subscription's options, defaults filled in.
func (s *Subscription) Options() SubscribeOptions { return s.opts }

// Done is closed when the subscription has been closed.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Pause stops deliveries to this subscription until Resume; deliveries in
// flight keep their leases.
func (s *Subscription) Pause() {
	if c := s.companion(); c != nil {
		c.Pause()
	}
	s.g.mu.Lock()
	s.paused = true
	s.g.assign()
	s.g.dispatch(s.g.b.clk.Now())
	s.g.mu.Unlock()
}

// Resume restarts deliveries after Pause.
func (s *Subscription) Resume() {
	if c := s.companion(); c != nil {
		c.Resume()
	}
	s.g.mu.Lock()
	s.paused = false
	s.g.assign()
	s.g.dispatch(s.g.b.clk.Now())
	s.g.mu.Unlock()
}

// Close leaves the group: no new deliveries, running handlers may finish
// (up to DrainTimeout), and deliveries not settled then go back to the
// group at once. When it was the group's last subscription in this Bus,
// cursors are committed and partitions released.
func (s *Subscription) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.DrainTimeout)
	defer cancel()
	return s.close(ctx, true)
}

func (s *Subscription) close(ctx context.Context, detach bool) error {
	s.rmu.Lock()
	s.rclosed = true
	c := s.redrive
	s.rmu.Unlock()
	var cerr error
	if c != nil {
		cerr = c.close(ctx, detach)
	}
	s.once.Do(func() {
		g := s.g
		g.mu.Lock()
		s.closing = true
		g.assign() // its partitions move once its deliveries are settled
		g.dispatch(g.b.clk.Now())
		g.mu.Unlock()
		s.qmu.Lock()
		s.qclosed = true
		s.qmu.Unlock()

		drained := make(chan struct{})
		go func() { s.wg.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-ctx.Done():
			s.cancel()
			s.err = fmt.Errorf("event: close subscription of group %q on %q: handlers still running: %w", g.name, g.topic, ctx.Err())
		}
		s.cancel()
		left := g.removeSub(s)
		if detach && left == 0 {
			g.b.mu.Lock()
			last := len(g.subsSnapshot()) == 0 && g.b.groups[g.key] == g
			if last {
				delete(g.b.groups, g.key)
			}
			g.b.mu.Unlock()
			if last {
				if err := g.shutdown(ctx); err != nil && s.err == nil {
					s.err = err
				}
			}
		}
		if s.err == nil {
			s.err = cerr
		}
		close(s.done)
	})
	return s.err
}

func (g *group) subsSnapshot() []*Subscription {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.subs
}

// enqueue hands ds to the handler goroutines, starting them as needed (up
// to Concurrency); called with g.mu held. A handler goroutine ends when
// the queue is empty, so an idle subscription holds none. Each queued
// delivery gets a goroutine of its own, up to Concurrency, whatever the
// running ones do: those may be in handlers that take long, and a
// delivery must not wait behind them while the subscription has room. A
// goroutine that finds the queue emptied by another ends at once.
func (s *Subscription) enqueue(ds []*Delivery) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.qclosed {
		return // given back to the group as the subscription leaves
	}
	s.queue = append(s.queue, ds...)
	for n := min(s.opts.Concurrency, s.workers+len(s.queue)-s.qhead); s.workers < n; s.workers++ {
		s.wg.Add(1)
		go s.work()
	}
}

// next takes the next delivery; nil ends the calling handler goroutine
// (the queue is empty, or the subscription closed).
func (s *Subscription) next() *Delivery {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.qclosed || s.qhead == len(s.queue) {
		s.workers--
		return nil
	}
	d := s.queue[s.qhead]
	s.queue[s.qhead] = nil
	s.qhead++
	if s.qhead == len(s.queue) {
		s.queue, s.qhead = s.queue[:0], 0
	}
	return d
}

func (s *Subscription) work() {
	defer s.wg.Done()
	clk := s.g.b.clk
	// ended is the clock's reading when the handler before returned, zero
	// when there is none or something else ran since (a delivery skipped).
	var ended time.Time
	for {
		d := s.next()
		if d == nil {
			return
		}
		// The time d starts: the reading that ended the delivery before,
		// when d was taken right after settling that one (one reading per
		// delivery instead of two), or a new one. It is earlier than d's
		// start by the time the settle took, never later: d's lease counts
		// from before d started and ends that much earlier, never later.
		// The partition's lease is checked at that reading, as the settle
		// checked it, not after a wait: the reading is renewed after a
		// skipped delivery, and next never waits for a delivery.
		now := ended
		if now.IsZero() {
			now = clk.Now()
		}
		ended = time.Time{}
		// Before the delivery is marked started: a delivery skipped here
		// is no attempt.
		if e := d.e; e != nil && e.dropped.Load() {
			s.unstall() // given up with its partition while it waited here
			continue
		}
		if e := d.e; e != nil && e.part.leaseEnded(now) {
			// The member's lease on the partition ran out while d waited
			// here (it stalled): another member may hold the partition
			// now. d goes back to the group as a delivery no handler saw,
			// for when the lease is renewed.
			s.g.giveBack(d)
			s.unstall()
			continue
		}
		if !s.opts.DeferStart {
			// The attempt starts here unless the group took d back first
			// (it waited past its lease, its subscription closed, its
			// partition was given up): one compare-and-swap decides, so a
			// delivery counts as an attempt exactly when its handler runs.
			if !d.e.tryStart(d.gen, now.UnixNano()) {
				s.unstall() // skipping d is progress too (see expire)
				continue
			}
			s.lastStart.Store(now.UnixNano())
			d.Deadline = now.Add(d.lease) // the group extends its lease to match
		}
		ended = s.handle(d)
		s.unstall()
	}
}

// giveBack returns d, which no handler started, to the group for a
// redelivery that is not another attempt.
func (g *group) giveBack(d *Delivery) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, err := g.currentEntry(d)
	if err != nil {
		return
	}
	g.endLease(e)
	if e.takeBack() {
		e.attempt--
	}
	e.state = stRetry
	g.retry.push(e)
	g.nHeld++
}

// unstall gives a subscription marked stalled (see expire) its share of
// the partitions back, once a handler goroutine of it took a delivery.
func (s *Subscription) unstall() {
	if !s.stalled.Load() {
		return
	}
	g := s.g
	g.mu.Lock()
	s.stalled.Store(false)
	g.assign()
	g.dispatch(g.b.clk.Now())
	g.mu.Unlock()
}

// handle calls the handler with d and settles d by its answer (unless
// the subscription acks by hand). It returns the clock's reading when the
// handler returned, which the settle used.
func (s *Subscription) handle(d *Delivery) time.Time {
	err := s.call(d)
	end := s.g.b.clk.Now()
	switch {
	case err != nil:
		_ = s.g.concludeAt(d, outcome{kind: outNack, reason: err.Error()}, end)
	case !s.opts.ManualAck:
		_ = s.g.concludeAt(d, outcome{kind: outAck}, end)
	}
	return end
}

func (s *Subscription) call(d *Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("event: handler panic: %v", r)
		}
	}()
	return s.h(s.ctx, d)
}
