package wsclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/internal/wsframe"
)

// Handler handles one message of a client subscription. Unless the
// subscription uses manual ack ([event.WithManualAck]), returning nil acks
// the message and returning an error nacks it with the error's text; with
// manual ack, settle it with [Message.Ack] or [Message.Nack] (an error
// still nacks). A panic is recovered and nacks.
type Handler func(ctx context.Context, m *Message) error

// Message is an event delivered to a client subscription. It is an
// [event.Message], as the [*event.Delivery] of an in-process subscription
// is: a handler written against event.Message runs on either.
type Message struct {
	event.Record
	// Group is the consumer group it was delivered to; "" for a message of
	// a live subscription ([Client.SubscribeLive]), which has no Attempt,
	// no Deadline and nothing to settle.
	Group string
	// Attempt is 1 for the first delivery and grows with each redelivery.
	Attempt int
	// Deadline is when its lease ends (by the local clock) unless extended
	// with ModAck.
	Deadline time.Time

	sub     *Subscription
	cc      *clientConn
	live    bool
	settled atomic.Bool
}

var _ event.Message = (*Message)(nil)

// Event implements [event.Message]: it returns the delivered record.
func (m *Message) Event() *event.Record { return &m.Record }

// Info implements [event.Message].
func (m *Message) Info() event.MessageInfo {
	return event.MessageInfo{Group: m.Group, Attempt: m.Attempt, Deadline: m.Deadline}
}

// Ack settles the message; it waits for the server's answer. An error
// matching wsproto.ErrAckFailed means the lease had ended and the event will be
// delivered again; ErrDisconnected means the connection it came on was
// lost (the event went back to the group). On a message of a live
// subscription it does nothing and returns an error matching ErrInvalid
// that says so.
func (m *Message) Ack(ctx context.Context) error {
	if m.live {
		return m.errLiveSettle("ACK")
	}
	m.settled.Store(true)
	return m.settle(ctx, &wsframe.Frame{Op: wsproto.OpAck, Topic: m.sub.topic, Group: m.Group, ID: m.ID, Attempt: m.Attempt})
}

// Nack ends the delivery unsuccessfully: the event is delivered again
// after a backoff, or dead-lettered after its last attempt.
func (m *Message) Nack(ctx context.Context, reason string) error {
	if m.live {
		return m.errLiveSettle("NACK")
	}
	m.settled.Store(true)
	return m.settle(ctx, &wsframe.Frame{Op: wsproto.OpNack, Topic: m.sub.topic, Group: m.Group, ID: m.ID, Attempt: m.Attempt, Reason: reason})
}

// ModAck extends the message's lease to now+extend.
func (m *Message) ModAck(ctx context.Context, extend time.Duration) error {
	if m.live {
		return m.errLiveSettle("MODACK")
	}
	ms := max(extend.Milliseconds(), 1)
	err := m.settle(ctx, &wsframe.Frame{Op: wsproto.OpModAck, Topic: m.sub.topic, Group: m.Group, ID: m.ID, Attempt: m.Attempt, ExtendMS: &ms})
	if err == nil {
		m.Deadline = m.sub.c.opts.Clock.Now().Add(extend)
	}
	return err
}

// settle sends an ack frame on the connection the message came on.
func (m *Message) settle(ctx context.Context, f *wsframe.Frame) error {
	sf, err := m.cc.call(ctx, f)
	if errors.Is(err, errLost) {
		return fmt.Errorf("%w: message %s arrived on a connection that has ended; it will be delivered again", ErrDisconnected, m.ID)
	}
	_ = sf
	return err
}

// settleAsync sends an ack frame without waiting; a refusal is logged.
func (m *Message) settleAsync(f *wsframe.Frame) {
	log := m.sub.c.log
	_, err := m.cc.send(f, func(sf *wsframe.ServerFrame, err error) {
		if err == nil {
			err = sf.Err()
		}
		if err != nil && !errors.Is(err, errLost) {
			log.Warn("wsclient: "+f.Op+" refused", "topic", f.Topic, "group", f.Group, "id", f.ID, "err", err)
		}
	})
	if err != nil && !errors.Is(err, errLost) {
		log.Warn("wsclient: "+f.Op+" not sent", "id", f.ID, "err", err)
	}
}

// subKey names a subscription: one per (topic, group) on a client.
type subKey struct{ topic, group string }

// Subscription is a client subscription. The client keeps it across
// reconnects.
type Subscription struct {
	c            *Client
	topic, group string
	h            Handler
	wire         wsframe.FrameOpts
	manual       bool
	drain        time.Duration

	ctx    context.Context // handlers' context, ends at stop
	cancel context.CancelFunc

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*Message
	paused bool
	ended  bool
	err    error
	wg     sync.WaitGroup
	done   chan struct{}
}

// Subscribe joins group on topic and calls h for each message, from
// Concurrency goroutines (default 1, which keeps order). Options are the
// bus's; the client honours the start positions (used when the group is
// new), WithAckTimeout, WithMaxAttempts, WithKeyOrdered, WithMaxPerKey
// and WithMaxInFlight, which it sends in the SUBSCRIBE frame, and
// WithManualAck, WithConcurrency and WithDrainTimeout, which it applies
// itself. Any other option it refuses, before sending anything, with an
// error that matches event.ErrInvalid and ErrInvalid and names the
// option's field: DeferStart (WithDeferStart), OnAssign and OnRevoke
// (WithRebalanceHooks), Filter (WithFilter), Backoff and MaxBackoff
// (WithBackoff), DeadLetterTopic (WithDeadLetterTopic), ExpireAfter, and
// any other field of event.SubscribeOptions SUBSCRIBE has no place for. With
// WithKeyOrdered the server sends a key's next message once the one
// before it is settled (acked, or dead-lettered after its last nack), so
// the messages of a key reach the handler in order even with Concurrency
// above 1.
func (c *Client) Subscribe(ctx context.Context, topic, group string, h Handler, opts ...event.SubscribeOption) (*Subscription, error) {
	var errs []error
	if err := event.ValidateTopic(topic); err != nil {
		errs = append(errs, err)
	}
	if err := event.ValidateGroup(group); err != nil {
		errs = append(errs, err)
	}
	if h == nil {
		errs = append(errs, invalid("handler", "nil"))
	}
	set, optErrs := subscribeSettings(opts)
	if err := errors.Join(append(errs, optErrs...)...); err != nil {
		return nil, err
	}
	s := &Subscription{
		c: c, topic: topic, group: group, h: h, wire: set.wire, manual: set.manual,
		drain: set.drain, done: make(chan struct{}),
	}
	s.cond = sync.NewCond(&s.mu)
	s.ctx, s.cancel = context.WithCancel(context.Background())

	key := subKey{topic, group}
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, ErrClosed
	case c.subs[key] != nil:
		c.mu.Unlock()
		return nil, wsproto.NewError(wsproto.CodeAlreadySubscribed, nil, "group %q on topic %q is already subscribed by this client", group, topic)
	}
	c.subs[key] = s
	c.mu.Unlock()
	// A SUBSCRIBE cut off by a lost connection is sent again; if the
	// reconnect has already restored it, the server says so.
	if _, err := c.call(ctx, s.frame(wsproto.OpSubscribe), true); err != nil && !errors.Is(err, wsproto.ErrAlreadySubscribed) {
		c.removeSub(s)
		s.cancel()
		return nil, err
	}
	for range set.concurrency {
		s.wg.Add(1)
		go s.work()
	}
	return s, nil
}

// Topic returns the subscribed topic.
func (s *Subscription) Topic() string { return s.topic }

// Group returns the consumer group.
func (s *Subscription) Group() string { return s.group }

// Done is closed when the subscription has ended: closed, its client
// closed, refused by the server after a reconnect, or its connection lost
// with DisableReconnect (see Err).
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err returns why the subscription ended, nil while it runs or after
// Close.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// frame builds a frame of op for this subscription.
func (s *Subscription) frame(op string) *wsframe.Frame {
	f := &wsframe.Frame{Op: op, Topic: s.topic, Group: s.group}
	if op == wsproto.OpSubscribe {
		w := s.wire
		f.Opts = &w
	}
	return f
}

// Pause asks the server to stop sending this subscription's events until
// Resume; events already received are still handled. The state survives
// reconnects.
func (s *Subscription) Pause(ctx context.Context) error { return s.setPaused(ctx, true) }

// Resume restarts delivery after Pause.
func (s *Subscription) Resume(ctx context.Context) error { return s.setPaused(ctx, false) }

func (s *Subscription) setPaused(ctx context.Context, p bool) error {
	s.mu.Lock()
	s.paused = p
	s.mu.Unlock()
	op := wsproto.OpResume
	if p {
		op = wsproto.OpPause
	}
	_, err := s.c.call(ctx, s.frame(op), false)
	if errors.Is(err, ErrDisconnected) && !s.c.opts.DisableReconnect {
		return nil // the reconnect applies it
	}
	return err
}

func (s *Subscription) isPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// Close leaves the group: running handlers may finish (up to the drain
// timeout), messages not handled yet are dropped, and the server gives
// the subscription's in-flight events back to the group at once.
func (s *Subscription) Close() error {
	s.stop(nil)
	s.c.removeSub(s)
	ctx, cancel := context.WithTimeout(context.Background(), s.c.opts.DialTimeout)
	defer cancel()
	cc, err := s.c.conn(ctx)
	if err != nil {
		return nil // no connection: the server already gave them back
	}
	if _, err := cc.call(ctx, s.frame(wsproto.OpUnsubscribe)); err != nil && !errors.Is(err, wsproto.ErrNotSubscribed) && !errors.Is(err, errLost) {
		return err
	}
	return nil
}

func (c *Client) removeSub(s *Subscription) {
	c.mu.Lock()
	if c.subs[subKey{s.topic, s.group}] == s {
		delete(c.subs, subKey{s.topic, s.group})
	}
	c.mu.Unlock()
}

// end stops the subscription with err, after the server refused it.
func (s *Subscription) end(err error) {
	s.c.removeSub(s)
	// Not on the reconnect loop, which handlers may be waiting for.
	s.c.wg.Add(1)
	go func() {
		defer s.c.wg.Done()
		s.stop(err)
	}()
}

// stop ends the workers, waiting for running handlers up to the drain
// timeout (then their context is cancelled).
func (s *Subscription) stop(err error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.ended = true
	if !errors.Is(err, ErrClosed) {
		s.err = err
	}
	s.queue = nil
	s.cond.Broadcast()
	s.mu.Unlock()
	drained := make(chan struct{})
	go func() { s.wg.Wait(); close(drained) }()
	t := s.c.opts.Clock.NewTimer(s.drain)
	select {
	case <-drained:
	case <-t.C():
		s.cancel()
		<-drained
	}
	t.Stop()
	s.cancel()
	close(s.done)
}

func (s *Subscription) push(m *Message) {
	s.mu.Lock()
	if !s.ended {
		s.queue = append(s.queue, m)
		s.cond.Signal()
	}
	s.mu.Unlock()
}

func (s *Subscription) next() *Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 && !s.ended {
		s.cond.Wait()
	}
	if s.ended {
		return nil
	}
	m := s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	return m
}

func (s *Subscription) work() {
	defer s.wg.Done()
	for {
		m := s.next()
		if m == nil {
			return
		}
		if m.cc.isDead() {
			continue // given back when its connection ended
		}
		err := s.call(m)
		switch {
		case err != nil:
			if !m.settled.Swap(true) {
				m.settleAsync(&wsframe.Frame{Op: wsproto.OpNack, Topic: s.topic, Group: s.group, ID: m.ID, Attempt: m.Attempt, Reason: err.Error()})
			}
		case !s.manual:
			if !m.settled.Swap(true) {
				m.settleAsync(&wsframe.Frame{Op: wsproto.OpAck, Topic: s.topic, Group: s.group, ID: m.ID, Attempt: m.Attempt})
			}
		}
	}
}

func (s *Subscription) call(m *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("wsclient: handler panic: %v", r)
		}
	}()
	return s.h(s.ctx, m)
}
