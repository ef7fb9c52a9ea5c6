package otel

import (
	"context"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/promethean/promlib/ws/wsclient"
)

// ClientHandler wraps a handler of a WebSocket subscription (ws/wsclient)
// in a consumer span, a child of the trace context of the event's
// headers. When h returns nil, the wrapper acks the message inside a
// "settle <topic>" span, so the trace ends at the subscriber's ack; an
// error nacks, as without the wrapper.
func (t *Tracing) ClientHandler(h wsclient.Handler) wsclient.Handler {
	return func(ctx context.Context, m *wsclient.Message) error {
		ctx, span := t.startProcess(ctx, m.Topic, m.Group, &m.Record, m.Attempt)
		defer span.End()
		if err := h(ctx, m); err != nil {
			fail(span, err)
			return err
		}
		actx, ack := t.tracer.Start(ctx, "settle "+m.Topic,
			trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(t.system,
				semconv.MessagingDestinationName(m.Topic),
				semconv.MessagingOperationTypeSettle,
				semconv.MessagingOperationName("ack"),
				semconv.MessagingMessageID(m.ID),
				semconv.MessagingConsumerGroupName(m.Group)))
		err := m.Ack(actx)
		if err != nil {
			fail(ack, err)
			fail(span, err)
		}
		ack.End()
		return nil
	}
}
