// Package otel traces promlib with OpenTelemetry: W3C trace context travels
// in event headers, so that one trace follows an event from the request
// that published it, through the bus and the gateway, to the subscriber
// that acked it, across processes and through the outbox.
//
// # Wiring
//
// [Tracing.PublishInterceptor] and [Tracing.DeliveryInterceptor] go in
// [event.Config]:
//
//	tr, _ := otel.New(otel.Config{TracerProvider: tp})
//	bus, _ := event.NewBus(store, event.Config{
//		PublishInterceptors:  []event.PublishInterceptor{tr.PublishInterceptor()},
//		DeliveryInterceptors: []event.DeliveryInterceptor{tr.DeliveryInterceptor()},
//	})
//
// # Spans
//
//   - Publish: a producer span "send <topic>" per record, a child of the
//     span in the publish's context or, when that context has none, of the
//     trace context the record's headers already carry (an outbox row
//     added with [Tracing.Inject], a PUBLISH frame whose opts.headers hold
//     a traceparent). The producer span's context is injected into the
//     record's headers (traceparent, tracestate).
//   - Delivery: a consumer span "process <topic>" around each handler
//     call, a child of the producer span extracted from the headers.
//   - [Tracing.ClientHandler] does the same for a WebSocket subscriber
//     (ws/wsclient), with a "settle <topic>" span around its ack, so the
//     trace ends at the subscriber's ack.
//   - [Tracing.HTTPMiddleware] starts a server span from a request's W3C
//     headers, for HTTP publish (otelhttp does it too).
//
// Spans carry the messaging semantic conventions: messaging.system
// ("promlib"), messaging.destination.name (the topic),
// messaging.operation.type and .name, messaging.message.id,
// messaging.destination.partition.id, messaging.consumer.group.name, and
// error.type on failure.
package otel
