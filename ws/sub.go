package ws

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
)

// subState is one subscription of a connection. It keeps, per event id,
// the attempt it sent last and that attempt's deadline, so that ACK, NACK
// and MODACK settle exactly the delivery the client saw (fenced acks).
type subState struct {
	c            *conn
	topic, group string
	maxInFlight  int
	sub          *event.Subscription

	ctx    context.Context // ends when the subscription or connection ends
	cancel context.CancelFunc
	ready  chan struct{} // closed once SUBSCRIBE is answered
	closed atomic.Bool

	gate   sync.Mutex // held while an EVENT is queued; guards paused
	resume *sync.Cond
	paused bool

	mu     sync.Mutex
	leases map[string]lease
}

type lease struct {
	attempt  int
	deadline time.Time
}

func newSubState(c *conn, topic, group string, maxInFlight int) *subState {
	s := &subState{
		c: c, topic: topic, group: group, maxInFlight: maxInFlight,
		ready:  make(chan struct{}),
		leases: make(map[string]lease),
	}
	s.resume = sync.NewCond(&s.gate)
	s.ctx, s.cancel = context.WithCancel(c.ctx)
	return s
}

// handle is the bus handler (manual ack): it queues the EVENT frame and
// returns, leaving the delivery in flight until the client settles it. It
// waits while the subscription is paused, while the delivery rate limit
// says so, and while the send queue is full; it never drops. A delivery it
// gives up on (the subscription ended) goes back to the group when the
// subscription closes.
func (s *subState) handle(_ context.Context, d *event.Delivery) error {
	select {
	case <-s.ready:
	case <-s.ctx.Done():
		return nil
	}
	if lim := s.c.deliverLim; lim != nil {
		if s.c.g.waitToken(s.ctx, lim) != nil {
			return nil
		}
	}
	s.gate.Lock()
	defer s.gate.Unlock()
	for s.paused && s.ctx.Err() == nil {
		s.resume.Wait()
	}
	if s.ctx.Err() != nil {
		return nil
	}
	s.track(d)
	f := framePool.Get().(*outFrame)
	f.op, f.sub, f.d = wsproto.OpEvent, s, d
	if !s.c.enqueue(s.ctx, f) {
		s.forget(d.ID, d.Attempt)
	}
	return nil
}

// setPaused pauses or resumes. Holding the gate, it waits for an EVENT
// being queued, so that no EVENT is queued after the answer to PAUSE.
func (s *subState) setPaused(p bool) {
	if p {
		s.sub.Pause()
	}
	s.gate.Lock()
	s.paused = p
	s.resume.Broadcast()
	s.gate.Unlock()
	if !p {
		s.sub.Resume()
	}
}

// close ends the subscription: handlers stop waiting, and the bus gives
// its in-flight deliveries back to the group at once.
func (s *subState) close() {
	if s.closed.Swap(true) {
		return
	}
	s.cancel()
	s.gate.Lock()
	s.resume.Broadcast()
	s.gate.Unlock()
	if s.sub != nil {
		if err := s.sub.Close(); err != nil {
			s.c.g.log.Warn("ws: closing subscription", "conn", s.c.id, "topic", s.topic, "group", s.group, "err", err)
		}
	}
}

func (s *subState) track(d *event.Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[d.ID] = lease{attempt: d.Attempt, deadline: d.Deadline}
	if len(s.leases) > 2*s.maxInFlight+16 {
		// The bus holds at most maxInFlight of ours in flight; the rest
		// are leases that ended unseen (expired, redelivered elsewhere).
		cut := s.c.g.now().Add(-time.Second)
		for id, l := range s.leases {
			if l.deadline.Before(cut) {
				delete(s.leases, id)
			}
		}
	}
}

// attempt returns the attempt to settle for id: the one the client names,
// or the one sent last.
func (s *subState) attempt(id string, named int) (int, bool) {
	s.mu.Lock()
	l, ok := s.leases[id]
	s.mu.Unlock()
	if !ok {
		return 0, false
	}
	if named > 0 {
		return named, true
	}
	return l.attempt, true
}

func (s *subState) forget(id string, attempt int) {
	s.mu.Lock()
	if l, ok := s.leases[id]; ok && l.attempt == attempt {
		delete(s.leases, id)
	}
	s.mu.Unlock()
}

func (s *subState) extend(id string, attempt int, deadline time.Time) {
	s.mu.Lock()
	if l, ok := s.leases[id]; ok && l.attempt == attempt {
		l.deadline = deadline
		s.leases[id] = l
	}
	s.mu.Unlock()
}

func (s *subState) leaseCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.leases)
}
