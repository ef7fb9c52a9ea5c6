package main

import (
	"context"
	"sync/atomic"
)

// runHandoff hands events from the publishing goroutine to a consumer
// goroutine in batches of -window over a channel; the consumer acks each
// event with an atomic add. No store, no lease, no cursor: what the
// machine does at best.
func runHandoff(ctx context.Context, n, payload, window int, t *tally) error {
	type ev struct {
		i       int
		payload []byte
	}
	batches := make(chan []ev, 4)
	var acked atomic.Int64 // events acked, one Add per event
	go func() {
		for b := range batches {
			for _, e := range b {
				t.delivered(payloadIndex(e.payload))
				acked.Add(1)
			}
		}
	}()
	batch := make([]ev, 0, window)
	for i := range n {
		p := makePayload(i, payload)
		t.published(i)
		batch = append(batch, ev{i, p})
		if len(batch) == window || i == n-1 {
			select {
			case batches <- batch:
			case <-ctx.Done():
				return ctx.Err()
			}
			batch = make([]ev, 0, window)
		}
	}
	close(batches)
	return nil
}
