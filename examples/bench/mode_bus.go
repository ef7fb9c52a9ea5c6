package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/storeurl"
)

// Backend is an opened store with its closer.
type Backend struct {
	Store event.Store
	// DB is the database the store is in (nil for memory).
	DB storeurl.Database
	// Raw, when set, measures the store's raw write ceiling for the same
	// documents (raw_insert_per_s).
	Raw func(ctx context.Context, o *Options) (float64, error)
	// RawArrays, when set, measures the same rows as Raw inserted as one
	// array per column (raw_array_insert_per_s).
	RawArrays func(ctx context.Context, o *Options) (float64, error)
	// RawEach, when set, measures with -sync what -publishers goroutines
	// reach committing one row (document) each per call
	// (raw_commit_each_per_s).
	RawEach func(ctx context.Context, o *Options) (RawEach, error)
	Close   func()
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
	if !o.Sync {
		pub, err := bus.NewPublisher(event.PublisherConfig{MaxPending: o.Window})
		if err != nil {
			return err
		}
		r.Window = pub.Config().MaxPending // each publisher's (publishPipelined)
	}
	t := newTally(o.N, o.Groups)
	grow, err := startGrowth(o, t)
	if err != nil {
		return err
	}
	opts := []event.SubscribeOption{event.FromLatest(), event.WithMaxInFlight(o.MaxInFlight)}
	if o.KeyOrdered {
		opts = append(opts, event.WithKeyOrdered())
	}
	for _, topic := range topicNames(o) {
		if err := subscribeGroups(ctx, o, bus, t, topic, opts); err != nil {
			return err
		}
	}
	if err := grow.afterSubscribe(); err != nil {
		return err
	}
	if err := warmUp(ctx, o, bus, t); err != nil {
		return err
	}
	if err := grow.beforePublish(); err != nil {
		return err
	}
	t.atDone = grow.finish
	start := time.Now()
	t.start = start
	if err := publishAll(ctx, o, bus, t); err != nil {
		return err
	}
	pubDur := time.Since(start)
	if err := t.finish(ctx, o, start, pubDur, r); err != nil {
		return err
	}
	if be.Raw != nil && o.Raw {
		raw, err := be.Raw(ctx, o)
		if err != nil {
			return fmt.Errorf("raw baseline: %w", err)
		}
		r.RawInsertPS = raw
		if raw > 0 {
			r.StoreOverRaw = r.PublishPerS / raw
			r.DeliverOverRaw = r.DeliverPerS / raw
		}
	}
	if be.RawArrays != nil && o.Raw && !o.Sync {
		raw, err := be.RawArrays(ctx, o)
		if err != nil {
			return fmt.Errorf("raw array baseline: %w", err)
		}
		r.RawArrayInsertPS = raw
		if raw > 0 {
			r.StoreOverRawArr = r.PublishPerS / raw
		}
	}
	if o.Sync {
		r.PublishCallP99Ms = t.calls.p99()
		if be.RawEach != nil && o.Raw {
			each, err := be.RawEach(ctx, o)
			if err != nil {
				return fmt.Errorf("raw commit-each baseline: %w", err)
			}
			r.RawCommitEachPerS, r.RawCommitEachP99Ms = each.PerS, each.P99Ms
			if each.PerS > 0 {
				r.PublishOverEach = r.PublishPerS / each.PerS
			}
		}
	}
	return nil
}

// subscribeGroups subscribes o.Consumers consumers of each of o.Groups
// groups (bench-<g>) to topic, each counting its deliveries in t.
func subscribeGroups(ctx context.Context, o *Options, bus *event.Bus, t *tally, topic string, opts []event.SubscribeOption) error {
	for g := range o.Groups {
		for range o.Consumers {
			_, err := bus.Subscribe(ctx, topic, "bench-"+strconv.Itoa(g), func(ctx context.Context, d *event.Delivery) error {
				if i, ok := payloadIndex(d.Payload); ok {
					t.delivered(g, i)
				}
				return nil
			}, opts...)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// warmUp publishes o.Warmup events (indices n and up, which the tally
// does not count) through the bus the measured run uses, and waits until
// every group has them: the process's heap, the store and the bus's
// buffers have grown to their working size when the measurement starts,
// as in a service that has been running for a while.
func warmUp(ctx context.Context, o *Options, bus *event.Bus, t *tally) error {
	if o.Warmup == 0 {
		return nil
	}
	pub, err := bus.NewPublisher(event.PublisherConfig{MaxPending: o.Window})
	if err != nil {
		return err
	}
	res := make([]*event.PublishFuture, o.Warmup)
	for k := range res {
		i := o.N + k
		res[k] = pub.Publish(ctx, topicOf(o, i), makePayload(i, o.Payload), keyOf(o, i)...)
	}
	for k, r := range res {
		if _, err := r.Get(ctx); err != nil {
			return fmt.Errorf("warm-up publish %d: %w", o.N+k, err)
		}
	}
	want := int64(o.Warmup) * int64(o.Groups)
	deadline := time.Now().Add(time.Minute)
	for t.warm.Load() < want {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm-up: %d of %d deliveries after a minute", t.warm.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// publishAll publishes events 0..n-1 from o.Publishers goroutines, each
// with its share, and returns when every publish is stored. Payloads are
// made as they are published, as a producer would, so that the bench
// holds no copy of the whole run.
func publishAll(ctx context.Context, o *Options, bus *event.Bus, t *tally) error {
	var wg sync.WaitGroup
	errs := make(chan error, o.Publishers)
	per := (o.N + o.Publishers - 1) / o.Publishers
	for p := range o.Publishers {
		lo, hi := p*per, min((p+1)*per, o.N)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if o.Sync {
				err = publishSync(ctx, o, bus, t, lo, hi)
			} else {
				err = publishPipelined(ctx, o, bus, t, lo, hi)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func publishSync(ctx context.Context, o *Options, bus *event.Bus, t *tally, lo, hi int) error {
	pace := newPacer(o, t, lo)
	for i := lo; i < hi; i++ {
		if err := pace.wait(ctx, i); err != nil {
			return err
		}
		payload := makePayload(i, o.Payload)
		t0 := time.Now()
		if _, err := bus.Publish(ctx, topicOf(o, i), payload, keyOf(o, i)...); err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
		t.calls.set(i, time.Since(t0))
	}
	return nil
}

// publishPipelined keeps a window of publishes in flight and checks each
// result, oldest first, before its slot in the ring is reused.
func publishPipelined(ctx context.Context, o *Options, bus *event.Bus, t *tally, lo, hi int) error {
	pub, err := bus.NewPublisher(event.PublisherConfig{MaxPending: o.Window})
	if err != nil {
		return err
	}
	pace := newPacer(o, t, lo)
	window := pub.Config().MaxPending
	ring := make([]*event.PublishFuture, window)
	idx := make([]int, window)
	check := func(k int) error {
		if ring[k] == nil {
			return nil
		}
		if _, err := ring[k].Get(ctx); err != nil {
			return fmt.Errorf("publish %d: %w", idx[k], err)
		}
		ring[k] = nil
		return nil
	}
	for i := lo; i < hi; i++ {
		k := (i - lo) % window
		if err := check(k); err != nil {
			return err
		}
		if err := pace.wait(ctx, i); err != nil {
			return err
		}
		payload := makePayload(i, o.Payload)
		ring[k], idx[k] = pub.Publish(ctx, topicOf(o, i), payload, keyOf(o, i)...), i
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	for k := range ring {
		if err := check(k); err != nil {
			return err
		}
	}
	return nil
}

// keyOf returns the key option of event i with -keys, none without.
func keyOf(o *Options, i int) []event.PublishOption {
	if o.Keys == 0 {
		return nil
	}
	return []event.PublishOption{event.WithKey("k" + strconv.Itoa(i%o.Keys))}
}
