package main

import (
	"context"
	"time"
)

// pacer spaces one publisher's events at a fixed rate (-rate, shared
// between the publishers). Each event has an intended send time; the
// publisher waits for it when early, and the event's latency is counted
// from that time, not from when it was actually sent, so a publisher held
// up by the bus adds its delay to the figures instead of hiding it (no
// coordinated omission).
type pacer struct {
	t     *tally
	every time.Duration // between two events of this publisher; 0: unpaced
	first int           // index of this publisher's first event
}

func newPacer(o *Options, t *tally, first int) pacer {
	p := pacer{t: t, first: first}
	if o.Rate > 0 {
		p.every = time.Duration(float64(time.Second) * float64(o.Publishers) / o.Rate)
	}
	return p
}

// wait blocks until event i is due and stamps its publish time.
func (p pacer) wait(ctx context.Context, i int) error {
	if p.every == 0 {
		p.t.published(i)
		return nil
	}
	due := time.Duration(i-p.first) * p.every
	if d := due - time.Since(p.t.start); d > 0 {
		// Sleeping per event would cost more than the gap at high rates:
		// wait only when at least 200µs early, so events go out in
		// small bursts that keep the average rate.
		if d >= 200*time.Microsecond {
			tm := time.NewTimer(d)
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
				return ctx.Err()
			}
		}
	}
	p.t.publishedAt(i, due)
	return nil
}
