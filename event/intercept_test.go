package event_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// Publish interceptors run in order around the store, see the records
// before they are stored, may change them and may refuse them.
func TestPublishInterceptors(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var trace []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		trace = append(trace, s)
	}
	errRefused := errors.New("refused")
	outer := func(next event.PublishFunc) event.PublishFunc {
		return func(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
			note("outer " + topic)
			if topic == "forbidden" {
				return nil, errRefused
			}
			out, err := next(ctx, topic, recs)
			note("outer done")
			return out, err
		}
	}
	inner := func(next event.PublishFunc) event.PublishFunc {
		return func(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
			note("inner " + topic)
			cp := make([]event.Record, len(recs))
			for i, r := range recs {
				h := map[string]string{"x-trace": "t1"}
				for k, v := range r.Headers {
					h[k] = v
				}
				r.Headers = h
				cp[i] = r
			}
			return next(ctx, topic, cp)
		}
	}
	store := event.NewMemoryStore()
	b, err := event.NewBus(store, event.Config{PublishInterceptors: []event.PublishInterceptor{outer, inner}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	ctx := context.Background()

	r, err := b.Publish(ctx, "orders", []byte(`1`), event.WithHeaders(map[string]string{"a": "b"}))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "b", "x-trace": "t1"}, r.Headers)
	stored, err := store.FindByID(ctx, "orders", r.ID)
	require.NoError(t, err)
	assert.Equal(t, "t1", stored.Headers["x-trace"], "the interceptor's change is stored")
	assert.Equal(t, []string{"outer orders", "inner orders", "outer done"}, trace)

	_, err = b.Publish(ctx, "forbidden", []byte(`1`))
	assert.ErrorIs(t, err, errRefused)
	head, err := store.Head(ctx, "forbidden")
	require.NoError(t, err)
	assert.Zero(t, head, "a refused publish stores nothing")
}

// Delivery interceptors wrap every handler call, in order, and see a
// handler's panic as an error.
func TestDeliveryInterceptors(t *testing.T) {
	t.Parallel()
	type call struct {
		name string
		err  error
	}
	calls := make(chan call, 16)
	named := func(name string) event.DeliveryInterceptor {
		return func(next event.Handler) event.Handler {
			return func(ctx context.Context, d *event.Delivery) error {
				err := next(ctx, d)
				calls <- call{name, err}
				return err
			}
		}
	}
	b, err := event.NewBus(event.NewMemoryStore(), event.Config{
		DeliveryInterceptors: []event.DeliveryInterceptor{named("outer"), named("inner")},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	ctx := context.Background()
	done := make(chan int, 2)
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		done <- d.Attempt
		if d.Attempt == 1 {
			panic("boom")
		}
		return nil
	}, event.FromEarliest(), event.WithBackoff(1, 1))
	require.NoError(t, err)
	_, err = b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)

	assert.Equal(t, 1, <-done)
	c := <-calls
	assert.Equal(t, "inner", c.name)
	assert.ErrorContains(t, c.err, "handler panic: boom")
	c = <-calls
	assert.Equal(t, "outer", c.name)
	assert.ErrorContains(t, c.err, "handler panic: boom")
	assert.Equal(t, 2, <-done, "the panic nacked the delivery")
	assert.Equal(t, call{"inner", nil}, <-calls)
	assert.Equal(t, call{"outer", nil}, <-calls)
}

func TestNilInterceptorIsRefused(t *testing.T) {
	t.Parallel()
	_, err := event.NewBus(event.NewMemoryStore(), event.Config{
		PublishInterceptors:  []event.PublishInterceptor{nil},
		DeliveryInterceptors: []event.DeliveryInterceptor{nil},
	})
	assert.ErrorIs(t, err, event.ErrInvalid)
	assert.ErrorContains(t, err, "PublishInterceptors[0]")
	assert.ErrorContains(t, err, "DeliveryInterceptors[0]")
}
