package wsclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/internal/wsframe"
)

// SlowPolicy is what the server does when a live subscription falls behind
// the queue it keeps for it (docs/PROTOCOL.md, "Live subscriptions"):
// [wsproto.SlowClose], the default (the server closes the connection with
// [wsproto.CloseSlowSubscriber]; the client reconnects and resumes from
// Position), or [wsproto.SlowSkip] (the server drops what it had queued
// and says so with a gap of reason [wsproto.GapSlow]; the subscription
// goes on with the newest events).
type SlowPolicy string

// liveBuffer bounds the messages a live subscription holds that its
// handler has not taken yet. At the bound the client stops reading the
// connection until the handler takes one, so that the server sees a
// slow subscriber and applies its SlowPolicy.
const liveBuffer = 1024

// LiveOptions are the options of [Client.SubscribeLive].
type LiveOptions struct {
	// Since, when set, is the last seq already seen: the subscription
	// starts with what the topic holds after it instead of at its head.
	Since *uint64
	// Slow is what the server does when the subscription falls behind
	// (default wsproto.SlowClose).
	Slow SlowPolicy
	// OnGap is called for each range of seqs the subscription does not
	// deliver, with the reason (wsproto.GapDeleted, wsproto.GapSlow), in order with the
	// handler's calls and from the same goroutine; nil: none. Position
	// moves past a gap either way.
	OnGap func(from, to uint64, reason string)
}

// LiveOption sets a field of [LiveOptions].
type LiveOption func(*LiveOptions)

// WithSince starts a live subscription after seq, the last seq already
// seen, with what the topic still holds after it.
func WithSince(seq uint64) LiveOption {
	return func(o *LiveOptions) { o.Since = &seq }
}

// WithSlow sets the slow policy of a live subscription.
func WithSlow(p SlowPolicy) LiveOption {
	return func(o *LiveOptions) { o.Slow = p }
}

// WithOnGap sets the gap hook of a live subscription.
func WithOnGap(fn func(from, to uint64, reason string)) LiveOption {
	return func(o *LiveOptions) { o.OnGap = fn }
}

// LiveSubscription is a live subscription of a topic (a SUBSCRIBE without
// group): the topic's events in seq order, nothing to acknowledge. The
// client keeps it across reconnects: on each one it subscribes again with
// since = [LiveSubscription.Position], so that no event is missed or
// handled twice.
type LiveSubscription struct {
	c     *Client
	topic string
	h     Handler
	slow  SlowPolicy
	onGap func(from, to uint64, reason string)

	ctx    context.Context // handlers' context, ends at stop
	cancel context.CancelFunc

	pos atomic.Uint64 // Position

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []liveItem
	started bool // an OK has set the first position
	ended   bool
	err     error
	done    chan struct{}
	wg      sync.WaitGroup
}

// liveItem is a message or a gap, in the order they came.
type liveItem struct {
	m        *Message
	from, to uint64
	reason   string
}

// SubscribeLive subscribes to topic live and calls h for each event, in
// seq order, from one goroutine. The subscription starts at the topic's
// head (or after [WithSince]'s seq) and goes on until Close. A message of a
// live subscription has Group "" and nothing to settle: h's error is
// logged and changes nothing (no event is delivered again), and
// [Message.Ack], Nack and ModAck return an error matching ErrInvalid that
// says it is live. Gaps (events deleted before they were sent, or dropped
// with wsproto.SlowSkip) go to [WithOnGap]'s hook.
func (c *Client) SubscribeLive(ctx context.Context, topic string, h Handler, opts ...LiveOption) (*LiveSubscription, error) {
	var o LiveOptions
	for _, opt := range opts {
		opt(&o)
	}
	var errs []error
	if err := event.ValidateTopic(topic); err != nil {
		errs = append(errs, err)
	}
	if h == nil {
		errs = append(errs, invalid("handler", "nil"))
	}
	switch o.Slow {
	case "", wsproto.SlowClose, wsproto.SlowSkip:
	default:
		errs = append(errs, invalid("Slow", "unknown policy %q (want %q or %q)", o.Slow, wsproto.SlowClose, wsproto.SlowSkip))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &LiveSubscription{c: c, topic: topic, h: h, slow: o.Slow, onGap: o.OnGap, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if o.Since != nil {
		s.pos.Store(*o.Since)
		s.started = true
	}

	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, ErrClosed
	case c.live[topic] != nil:
		c.mu.Unlock()
		return nil, wsproto.NewError(wsproto.CodeAlreadySubscribed, nil, "topic %q has a live subscription on this client already", topic)
	}
	c.live[topic] = s
	c.mu.Unlock()
	// A SUBSCRIBE cut off by a lost connection is sent again; if the
	// reconnect has already restored it, the server says so.
	f := s.frame(wsproto.OpSubscribe)
	sf, err := c.call(ctx, f, true)
	switch {
	case errors.Is(err, wsproto.ErrAlreadySubscribed):
	case err != nil:
		c.removeLive(s)
		s.cancel()
		return nil, err
	default:
		s.subscribed(f, sf)
	}
	s.wg.Add(1)
	go s.work()
	return s, nil
}

// Topic returns the subscribed topic.
func (s *LiveSubscription) Topic() string { return s.topic }

// Position returns the last seq the subscription has handled: that of the
// last message its handler returned from, or the to of the last gap, if
// later; before any, where it started. The client resubscribes from it
// after a reconnect; give it to [WithSince] to resume in another client.
func (s *LiveSubscription) Position() uint64 { return s.pos.Load() }

// Done is closed when the subscription has ended: closed, its client
// closed, refused by the server after a reconnect, or its connection lost
// with DisableReconnect (see Err).
func (s *LiveSubscription) Done() <-chan struct{} { return s.done }

// Err returns why the subscription ended, nil while it runs or after
// Close.
func (s *LiveSubscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// frame builds a frame of op for this subscription: a SUBSCRIBE resumes
// after Position once the subscription has one.
func (s *LiveSubscription) frame(op string) *wsframe.Frame {
	f := &wsframe.Frame{Op: op, Topic: s.topic}
	if op != wsproto.OpSubscribe {
		return f
	}
	f.Opts = &wsframe.FrameOpts{Slow: string(s.slow)}
	s.mu.Lock()
	if s.started {
		since := int64(s.pos.Load())
		f.Opts.Since = &since
	}
	s.mu.Unlock()
	return f
}

// subscribed takes the OK of SUBSCRIBE f: the first sets the position; one
// whose seq is below the since sent (a since beyond the topic, which the
// server cannot have: another store) sets it back.
func (s *LiveSubscription) subscribed(f *wsframe.Frame, ok *wsframe.ServerFrame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.started:
		s.started = true
		if ok.Seq > s.pos.Load() {
			s.pos.Store(ok.Seq)
		}
	case f.Opts.Since != nil && ok.Seq < uint64(*f.Opts.Since):
		s.c.log.Warn("wsclient: the server's topic ends before the live subscription's position; starting at its head",
			"topic", s.topic, "position", *f.Opts.Since, "head", ok.Seq)
		s.pos.Store(ok.Seq)
	}
}

// Close ends the subscription: a running handler may finish, messages not
// handled yet are dropped, and the server is told (UNSUBSCRIBE).
func (s *LiveSubscription) Close() error {
	s.stop(nil)
	s.c.removeLive(s)
	ctx, cancel := context.WithTimeout(context.Background(), s.c.opts.DialTimeout)
	defer cancel()
	cc, err := s.c.conn(ctx)
	if err != nil {
		return nil // no connection: nothing to tell
	}
	if _, err := cc.call(ctx, s.frame(wsproto.OpUnsubscribe)); err != nil && !errors.Is(err, wsproto.ErrNotSubscribed) && !errors.Is(err, errLost) {
		return err
	}
	return nil
}

func (c *Client) removeLive(s *LiveSubscription) {
	c.mu.Lock()
	if c.live[s.topic] == s {
		delete(c.live, s.topic)
	}
	c.mu.Unlock()
}

// end stops the subscription with err, after the server refused or ended
// it.
func (s *LiveSubscription) end(err error) {
	s.c.removeLive(s)
	s.c.wg.Add(1)
	go func() {
		defer s.c.wg.Done()
		s.stop(err)
	}()
}

// stop ends the worker, waiting for a running handler.
func (s *LiveSubscription) stop(err error) {
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
	s.cancel()
	s.wg.Wait()
	close(s.done)
}

// push queues an item, waiting while the queue is full: the reader of the
// connection then reads no more, and the server sees a slow subscriber.
func (s *LiveSubscription) push(it liveItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) >= liveBuffer && !s.ended {
		s.cond.Wait()
	}
	if s.ended {
		return
	}
	s.queue = append(s.queue, it)
	s.cond.Broadcast()
}

func (s *LiveSubscription) next() (liveItem, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 && !s.ended {
		s.cond.Wait()
	}
	if s.ended {
		return liveItem{}, false
	}
	it := s.queue[0]
	s.queue[0] = liveItem{}
	s.queue = s.queue[1:]
	if len(s.queue) == 0 {
		s.queue = nil
	}
	s.cond.Broadcast() // room
	return it, true
}

// work handles the queued items in order. What is at or below Position is
// skipped: after a reconnect the server sends again what was queued here
// and not handled yet when the connection was lost.
func (s *LiveSubscription) work() {
	defer s.wg.Done()
	for {
		it, ok := s.next()
		if !ok {
			return
		}
		pos := s.pos.Load()
		if it.m == nil {
			if it.to <= pos {
				continue
			}
			from := max(it.from, pos+1)
			if s.onGap != nil {
				s.callGap(from, it.to, it.reason)
			}
			s.pos.Store(it.to)
			continue
		}
		if it.m.Seq <= pos {
			continue
		}
		if err := s.call(it.m); err != nil {
			s.c.log.Debug("wsclient: live handler failed (nothing is redelivered)", "topic", s.topic, "seq", it.m.Seq, "err", err)
		}
		s.pos.Store(it.m.Seq)
	}
}

func (s *LiveSubscription) call(m *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("wsclient: handler panic: %v", r)
		}
	}()
	return s.h(s.ctx, m)
}

func (s *LiveSubscription) callGap(from, to uint64, reason string) {
	defer func() {
		if r := recover(); r != nil {
			s.c.log.Warn("wsclient: gap hook panic", "topic", s.topic, "panic", r)
		}
	}()
	s.onGap(from, to, reason)
}

// routeLive hands an EVENT without group, or a GAP, to the live
// subscription of its topic.
func (c *Client) routeLive(cc *clientConn, f *wsframe.ServerFrame) {
	c.mu.Lock()
	s := c.live[f.Topic]
	c.mu.Unlock()
	if s == nil {
		return // unsubscribed meanwhile
	}
	if f.Op == wsproto.OpGap {
		s.push(liveItem{from: f.From, to: f.To, reason: f.Reason})
		return
	}
	if f.Event == nil {
		c.log.Warn("wsclient: EVENT without event", "topic", f.Topic)
		return
	}
	s.push(liveItem{m: &Message{Record: *f.Event, cc: cc, live: true}})
}

// liveEnded ends the live subscription an ERR without corr and group
// names: the server ended it (a re-AUTH whose token may not hold it).
func (c *Client) liveEnded(f *wsframe.ServerFrame) {
	c.mu.Lock()
	s := c.live[f.Topic]
	c.mu.Unlock()
	c.log.Warn("wsclient: live subscription ended by the server", "topic", f.Topic, "code", f.Code, "msg", f.Msg)
	if s != nil {
		s.end(f.Err())
	}
}

// resubscribeLive subscribes every live subscription again on cc, from
// its Position. A subscription the server now refuses ends with that
// error.
func (c *Client) resubscribeLive(ctx context.Context, cc *clientConn) error {
	for _, s := range c.liveSnapshot() {
		f := s.frame(wsproto.OpSubscribe)
		sf, err := cc.call(ctx, f)
		var pe *wsproto.Error
		switch {
		case errors.As(err, &pe) && pe.Code != wsproto.CodeAlreadySubscribed:
			c.log.Warn("wsclient: live subscription refused after reconnect", "topic", s.topic, "err", err)
			s.end(err)
		case err != nil && pe == nil:
			return err
		case err == nil:
			s.subscribed(f, sf)
		}
	}
	return nil
}

func (c *Client) liveSnapshot() []*LiveSubscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*LiveSubscription, 0, len(c.live))
	for _, s := range c.live {
		out = append(out, s)
	}
	return out
}

// errLiveSettle is the error of Ack, Nack and ModAck on a message of a
// live subscription.
func (m *Message) errLiveSettle(op string) error {
	return fmt.Errorf("%w: %s of message %s (seq %d): it is of a live subscription, which has nothing to settle", ErrInvalid, op, m.ID, m.Seq)
}
