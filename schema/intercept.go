package schema

import (
	"context"
	"errors"
	"maps"

	"github.com/promethean/promlib/event"
)

// Interceptor returns the publish interceptor that validates every record
// of a topic with a schema against the topic's current version and sets
// the version in the record's header (Config.Header). A record that does
// not match is refused alone with a [*ValidationError] (in an
// [event.RecordErrors] when the publish had several records); the others
// are stored. Records of topics without a schema pass untouched, and so
// do tombstones (a null payload) and dead letters.
//
//	reg, _ := schema.NewRegistry(ctx, schema.Config{Store: schema.NewMemoryStore()})
//	bus, _ := event.NewBus(store, event.Config{PublishInterceptors: []event.PublishInterceptor{reg.Interceptor()}})
func (r *Registry) Interceptor() event.PublishInterceptor {
	return func(next event.PublishFunc) event.PublishFunc {
		return func(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
			c := (*r.cur.Load())[topic]
			if c == nil {
				return next(ctx, topic, recs)
			}
			return r.publish(ctx, c, next, topic, recs)
		}
	}
}

func (r *Registry) publish(ctx context.Context, c *current, next event.PublishFunc, topic string, recs []event.Record) ([]event.Record, error) {
	var errs []error
	good := make([]event.Record, 0, len(recs))
	for i, rec := range recs {
		if string(rec.Payload) == "null" && event.IsJSONContentType(rec.ContentType) {
			good = append(good, rec) // a tombstone
			continue
		}
		if err := c.validate(rec.Payload, rec.ContentType); err != nil {
			if errs == nil {
				errs = make([]error, len(recs))
			}
			errs[i] = err
			continue
		}
		h := make(map[string]string, len(rec.Headers)+1)
		maps.Copy(h, rec.Headers)
		h[r.cfg.Header] = c.header
		rec.Headers = h
		good = append(good, rec)
	}
	if errs == nil {
		return next(ctx, topic, good)
	}
	if len(recs) == 1 {
		return nil, errs[0]
	}
	out := make([]event.Record, len(recs))
	if len(good) > 0 {
		stored, err := next(ctx, topic, good)
		if err != nil && stored == nil {
			return nil, err
		}
		var re *event.RecordErrors
		if err != nil && !errors.As(err, &re) {
			return nil, err
		}
		j := 0
		for i := range recs {
			if errs[i] != nil {
				continue
			}
			out[i] = stored[j]
			if re != nil {
				errs[i] = re.Errs[j]
			}
			j++
		}
	}
	return out, &event.RecordErrors{Errs: errs}
}
