package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/promethean/promlib/event"
)

// Backend is an opened store with its closer.
type Backend struct {
	Store event.Store
	// Raw, when set, measures the store's raw write ceiling for the same
	// documents (raw_insert_per_s).
	Raw   func(ctx context.Context, o *Options) (float64, error)
	Close func()
}

func openMemory(ctx context.Context, o *Options) (Backend, error) {
	return Backend{Store: event.NewMemoryStore(), Close: func() {}}, nil
}

const benchTopic = "bench.events"

// runBus publishes through an event.Bus and consumes with auto-ack
// handlers, one Bus per process as a host service would.
func runBus(ctx context.Context, o *Options, be Backend, r *Result) error {
	bus, err := event.NewBus(be.Store, event.Config{Partitions: o.Partitions, PollInterval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = bus.Close(cctx)
	}()
	t := newTally(o.N, o.Groups)
	for g := range o.Groups {
		for range o.Consumers {
			_, err := bus.Subscribe(ctx, benchTopic, "bench-"+strconv.Itoa(g), func(ctx context.Context, d *event.Delivery) error {
				if i, ok := payloadIndex(d.Payload); ok {
					t.delivered(g, i)
				}
				return nil
			}, event.FromLatest(), event.WithMaxInFlight(o.MaxInFlight))
			if err != nil {
				return err
			}
		}
	}
	payloads := make([][]byte, o.N)
	for i := range payloads {
		payloads[i] = makePayload(i, o.Payload)
	}

	start := time.Now()
	t.start = start
	var wg sync.WaitGroup
	errs := make(chan error, o.Publishers)
	per := (o.N + o.Publishers - 1) / o.Publishers
	for p := range o.Publishers {
		lo, hi := p*per, min((p+1)*per, o.N)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				t.published(i)
				if _, err := bus.Publish(ctx, benchTopic, payloads[i]); err != nil {
					errs <- fmt.Errorf("publish %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	pubDur := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	payloads = nil
	if err := t.finish(ctx, o, start, pubDur, r); err != nil {
		return err
	}
	if be.Raw != nil {
		raw, err := be.Raw(ctx, o)
		if err != nil {
			return fmt.Errorf("raw baseline: %w", err)
		}
		r.RawInsertPS = raw
		if raw > 0 {
			r.StoreOverRaw = r.PublishPerS / raw
		}
	}
	return nil
}
