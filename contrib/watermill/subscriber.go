package watermill

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/promethean/promlib/event"
)

// Subscriber delivers the records of a promlib Bus as Watermill messages,
// in a consumer group.
type Subscriber struct {
	bus  *event.Bus
	cfg  SubscriberConfig
	opts event.SubscribeOptions

	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
}

var _ message.Subscriber = (*Subscriber)(nil)

// NewSubscriber returns a Subscriber over bus. The bus stays the
// caller's: Close does not close it.
func NewSubscriber(bus *event.Bus, cfg SubscriberConfig) (*Subscriber, error) {
	if bus == nil {
		return nil, fmt.Errorf("watermill: bus: nil")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.SubscribeOptions = slices.Clone(cfg.SubscribeOptions)
	return &Subscriber{bus: bus, cfg: cfg, opts: cfg.subscribeOptions(), done: make(chan struct{})}, nil
}

// Subscribe joins the subscriber's consumer group on topic and returns
// the channel of its messages. The next message comes after the previous
// one is acked or nacked. The channel is closed when ctx ends or the
// Subscriber closes; a message not settled by then goes back to the group.
// Each message's context is ctx, canceled when it is acked or nacked.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	subCtx, cancel := context.WithCancel(ctx)
	out := make(chan *message.Message)
	h := func(hctx context.Context, d *event.Delivery) error {
		return s.deliver(subCtx, hctx, out, d)
	}
	sub, err := s.bus.Subscribe(ctx, topic, s.cfg.ConsumerGroup, h, event.WithOptions(s.opts))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watermill: subscribe to %q: %w", topic, err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-subCtx.Done():
		case <-s.done:
		case <-sub.Done():
		}
		cancel()
		if err := sub.Close(); err != nil {
			s.cfg.Logger.Warn("watermill: closing a subscription", "topic", topic, "err", err)
		}
		close(out) // the handlers have returned: none sends any more
	}()
	return out, nil
}

// deliver hands one delivery to the consumer as a message and waits for
// its ack or nack.
func (s *Subscriber) deliver(subCtx, hctx context.Context, out chan<- *message.Message, d *event.Delivery) error {
	msg := message.NewMessage(d.ID, slices.Clone([]byte(d.Payload)))
	if len(d.Headers) > 0 {
		msg.Metadata = message.Metadata(maps.Clone(d.Headers))
	}
	mctx, mcancel := context.WithCancel(subCtx)
	defer mcancel()
	msg.SetContext(mctx)
	select {
	case out <- msg:
	case <-subCtx.Done():
		return errSubscriptionEnded
	case <-hctx.Done():
		return hctx.Err()
	}
	select {
	case <-msg.Acked():
		return nil
	case <-msg.Nacked():
		return ErrNacked
	case <-subCtx.Done():
		return errSubscriptionEnded
	case <-hctx.Done():
		return hctx.Err()
	}
}

// Close ends every subscription, closes their channels (messages not
// settled go back to the group) and waits for them.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}
