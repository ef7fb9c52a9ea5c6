package watermill

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/promethean/promlib/event"
)

// Publisher publishes Watermill messages as records of a promlib Bus.
type Publisher struct {
	bus    *event.Bus
	cfg    Config
	closed atomic.Bool
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher over bus. The bus stays the caller's:
// Close does not close it.
func NewPublisher(bus *event.Bus, cfg Config) (*Publisher, error) {
	if bus == nil {
		return nil, fmt.Errorf("watermill: bus: nil")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{bus: bus, cfg: cfg}, nil
}

// Publish stores messages as records of topic, in their order, in one
// store append: all are stored or, on an error, none is (a message that
// the bus refuses, such as metadata that is not UTF-8, is named in the
// error). It runs in the context of the first message.
func (p *Publisher) Publish(topic string, messages ...*message.Message) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if len(messages) == 0 {
		return nil
	}
	recs := make([]event.Record, 0, len(messages))
	for i, m := range messages {
		r, err := p.bus.NewRecord(topic, m.Payload, event.PublishOptions{
			ID: m.UUID, Headers: map[string]string(m.Metadata), ContentType: p.cfg.ContentType,
		})
		if err != nil {
			return fmt.Errorf("watermill: message %d (%s): %w", i, m.UUID, err)
		}
		recs = append(recs, r)
	}
	ctx := messages[0].Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if _, err := p.bus.Append(ctx, topic, recs); err != nil {
		return fmt.Errorf("watermill: publish to %q: %w", topic, err)
	}
	return nil
}

// Close makes further publishes fail with ErrClosed; publishes are
// synchronous, so nothing is left to flush.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	return nil
}
