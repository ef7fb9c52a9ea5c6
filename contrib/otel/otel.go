package otel

import (
	"context"
	"errors"
	"maps"
	"strconv"

	global "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/promethean/promlib/event"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/promethean/promlib/contrib/otel"

// DefaultSystem is the default messaging.system.
const DefaultSystem = "promlib"

// Config configures [New]. The zero value of a field means its default.
type Config struct {
	// TracerProvider makes the tracer (default: the global provider).
	TracerProvider trace.TracerProvider
	// Propagator writes and reads trace context in headers (default: W3C
	// trace context, traceparent and tracestate).
	Propagator propagation.TextMapPropagator
	// System is the messaging.system attribute (default "promlib").
	System string
}

// Tracing makes the interceptors and wrappers that trace promlib.
type Tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	system attribute.KeyValue
}

// New returns a Tracing configured by cfg.
func New(cfg Config) (*Tracing, error) {
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = global.GetTracerProvider()
	}
	if cfg.Propagator == nil {
		cfg.Propagator = propagation.TraceContext{}
	}
	if cfg.System == "" {
		cfg.System = DefaultSystem
	}
	return &Tracing{
		tracer: cfg.TracerProvider.Tracer(ScopeName),
		prop:   cfg.Propagator,
		system: semconv.MessagingSystemKey.String(cfg.System),
	}, nil
}

// Inject returns a copy of headers with the trace context of ctx added,
// for records published later in another context: an outbox row
// (outbox.Message.Headers) or a WebSocket PUBLISH's opts.headers.
func (t *Tracing) Inject(ctx context.Context, headers map[string]string) map[string]string {
	h := make(map[string]string, len(headers)+2)
	maps.Copy(h, headers)
	t.prop.Inject(ctx, propagation.MapCarrier(h))
	return h
}

// Extract returns ctx with the trace context that headers carry, if any.
func (t *Tracing) Extract(ctx context.Context, headers map[string]string) context.Context {
	if len(headers) == 0 {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.MapCarrier(headers))
}

// PublishInterceptor returns the interceptor that starts a producer span
// per record and injects its context into the record's headers.
func (t *Tracing) PublishInterceptor() event.PublishInterceptor {
	return func(next event.PublishFunc) event.PublishFunc {
		return func(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
			out := make([]event.Record, len(recs))
			copy(out, recs)
			spans := make([]trace.Span, len(out))
			traced := trace.SpanContextFromContext(ctx).IsValid()
			for i := range out {
				r := &out[i]
				parent := ctx
				if !traced {
					parent = t.Extract(ctx, r.Headers)
				}
				sctx, span := t.tracer.Start(parent, "send "+topic,
					trace.WithSpanKind(trace.SpanKindProducer),
					trace.WithAttributes(t.attrs(topic, semconv.MessagingOperationTypeSend, "publish", r)...))
				if len(out) > 1 {
					span.SetAttributes(semconv.MessagingBatchMessageCount(len(out)))
				}
				r.Headers = t.Inject(sctx, r.Headers)
				spans[i] = span
			}
			stored, err := next(ctx, topic, out)
			for i, span := range spans {
				if err != nil {
					fail(span, err)
				} else if i < len(stored) {
					span.SetAttributes(attribute.Int64("messaging.promlib.seq", int64(stored[i].Seq)))
				}
				span.End()
			}
			return stored, err
		}
	}
}

// DeliveryInterceptor returns the interceptor that runs each handler call
// in a consumer span, a child of the trace context in the record's
// headers.
func (t *Tracing) DeliveryInterceptor() event.DeliveryInterceptor {
	return func(next event.Handler) event.Handler {
		return func(ctx context.Context, d *event.Delivery) error {
			ctx, span := t.startProcess(ctx, d.Topic, d.Group, &d.Record, d.Attempt)
			defer span.End()
			err := next(ctx, d)
			if err != nil {
				fail(span, err)
			}
			return err
		}
	}
}

// startProcess starts the consumer span of one delivery.
func (t *Tracing) startProcess(ctx context.Context, topic, group string, r *event.Record, attempt int) (context.Context, trace.Span) {
	return t.tracer.Start(t.Extract(ctx, r.Headers), "process "+topic,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(append(t.attrs(topic, semconv.MessagingOperationTypeProcess, "process", r),
			semconv.MessagingConsumerGroupName(group),
			attribute.Int("messaging.promlib.attempt", attempt))...))
}

// attrs are the attributes of every span about record r of topic.
func (t *Tracing) attrs(topic string, op attribute.KeyValue, opName string, r *event.Record) []attribute.KeyValue {
	return []attribute.KeyValue{t.system,
		semconv.MessagingDestinationName(topic), op, semconv.MessagingOperationName(opName),
		semconv.MessagingMessageID(r.ID), semconv.MessagingDestinationPartitionID(strconv.Itoa(r.Partition))}
}

// fail marks span as failed with err.
func fail(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
}

// errorType names err's kind for error.type.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, event.ErrInvalid):
		return "invalid"
	case errors.Is(err, event.ErrClosed):
		return "closed"
	}
	return "_OTHER"
}
