package event

import (
	"context"
	"encoding/json"
	"fmt"
)

// PublishJSON encodes v as JSON and publishes it to topic with
// [Bus.Publish]: the typed form of Publish, for a program whose events are
// Go values (the producer side of [SubscribeJSON] and [Decode]). A value
// that does not encode is an error wrapping [ErrInvalid].
func PublishJSON[T any](ctx context.Context, b *Bus, topic string, v T, opts ...PublishOption) (Record, error) {
	p, err := json.Marshal(v)
	if err != nil {
		return Record{}, invalid("payload", "encode %T: %v", v, err)
	}
	return b.Publish(ctx, topic, p, opts...)
}

// Decode decodes the record's payload into a T.
func Decode[T any](r *Record) (T, error) {
	var v T
	if r.IsBinary() {
		return v, fmt.Errorf("event: decode payload of %s/%d (id %q) as %T: %w", r.Topic, r.Seq, r.ID, v, invalid("payload", "content type %q is not JSON", truncateText(r.ContentType, 64)))
	}
	if err := json.Unmarshal(r.Payload, &v); err != nil {
		return v, fmt.Errorf("event: decode payload of %s/%d (id %q) as %T: %w", r.Topic, r.Seq, r.ID, v, err)
	}
	return v, nil
}

// TypedHandler handles a delivery whose payload was decoded into a T.
type TypedHandler[T any] func(ctx context.Context, v T, d *Delivery) error

// SubscribeJSON subscribes with a handler that receives payloads decoded
// into T. A payload that does not decode is dead-lettered at once: another
// attempt would fail the same way.
func SubscribeJSON[T any](ctx context.Context, b *Bus, topic, group string, h TypedHandler[T], opts ...SubscribeOption) (*Subscription, error) {
	if h == nil {
		return nil, invalid("handler", "nil")
	}
	return b.Subscribe(ctx, topic, group, func(ctx context.Context, d *Delivery) error {
		v, err := Decode[T](&d.Record)
		if err != nil {
			return d.DeadLetter(ctx, err.Error())
		}
		return h(ctx, v, d)
	}, opts...)
}
