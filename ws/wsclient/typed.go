package wsclient

import (
	"context"
	"encoding/json"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
)

// PublishJSON encodes v as JSON and publishes it with c.
func PublishJSON[T any](ctx context.Context, c *Client, topic string, v T, opts ...event.PublishOption) (wsproto.Published, error) {
	p, err := json.Marshal(v)
	if err != nil {
		return wsproto.Published{}, invalid("payload", "encode %T: %v", v, err)
	}
	return c.Publish(ctx, topic, p, opts...)
}

// TypedHandler handles a message whose payload was decoded into a T.
type TypedHandler[T any] func(ctx context.Context, v T, m *Message) error

// SubscribeJSON subscribes with a handler that receives payloads decoded
// into T. A payload that does not decode is nacked with the decode error
// (and dead-lettered by the server after its last attempt).
func SubscribeJSON[T any](ctx context.Context, c *Client, topic, group string, h TypedHandler[T], opts ...event.SubscribeOption) (*Subscription, error) {
	if h == nil {
		return nil, invalid("handler", "nil")
	}
	return c.Subscribe(ctx, topic, group, func(ctx context.Context, m *Message) error {
		v, err := event.Decode[T](&m.Record)
		if err != nil {
			return err
		}
		return h(ctx, v, m)
	}, opts...)
}
