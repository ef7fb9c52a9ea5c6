package event

import (
	"context"
	"fmt"
)

// PublishFunc stores records of one topic and returns the stored ones in
// input order, as [Bus.Append] does.
type PublishFunc func(ctx context.Context, topic string, recs []Record) ([]Record, error)

// PublishInterceptor wraps the publish path of a [Bus]: it sees the
// records of every publish before they are stored, and may change them
// (copy the slice and any map it changes: the caller may still hold them)
// or refuse them by returning an error without calling next. Dead-lettering
// publishes through it too, to the dead-letter topic ([IsDeadLetterTopic]).
// Schema validation and tracing header injection are interceptors.
type PublishInterceptor func(next PublishFunc) PublishFunc

// DeliveryInterceptor wraps every handler call of a [Bus]'s subscriptions.
// A panic of the handler reaches it as an error. Tracing extraction and
// handler timing are interceptors.
type DeliveryInterceptor func(next Handler) Handler

// chainPublish wraps core in ics, the first outermost.
func chainPublish(core PublishFunc, ics []PublishInterceptor) PublishFunc {
	p := core
	for i := len(ics) - 1; i >= 0; i-- {
		p = ics[i](p)
	}
	return p
}

// chainDelivery wraps h in ics, the first outermost. With interceptors, h
// recovers its own panic, so that they see it as an error.
func chainDelivery(h Handler, ics []DeliveryInterceptor) Handler {
	if len(ics) == 0 {
		return h
	}
	h = recovering(h)
	for i := len(ics) - 1; i >= 0; i-- {
		h = ics[i](h)
	}
	return h
}

// recovering returns h with a panic turned into an error.
func recovering(h Handler) Handler {
	return func(ctx context.Context, d *Delivery) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("event: handler panic: %v", r)
			}
		}()
		return h(ctx, d)
	}
}
