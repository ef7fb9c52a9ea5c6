package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// tally counts deliveries per group and event index, and samples latencies.
type tally struct {
	start   time.Time
	pubAt   []atomic.Int64 // ns since start, per index
	counts  [][]atomic.Uint32
	lat     [][]float32 // per group, per index: ms of the first delivery
	total   atomic.Int64
	warm    atomic.Int64 // deliveries of warm-up events (see warmUp)
	calls   callTimes    // with -sync: how long each Bus.Publish took
	want    int64
	done    chan struct{}
	doneOne sync.Once
	// atDone, when set, runs once every delivery is in (or finish gave
	// up), before finish computes the rates and figures: -mode bus takes
	// its last snapshot of the process there (see growth.go).
	atDone func(r *Result) error
}

func newTally(n, groups int) *tally {
	t := &tally{
		start: time.Now(),
		pubAt: make([]atomic.Int64, n),
		calls: newCallTimes(n),
		want:  int64(n) * int64(groups),
		done:  make(chan struct{}),
	}
	for range groups {
		t.counts = append(t.counts, make([]atomic.Uint32, n))
		t.lat = append(t.lat, make([]float32, n))
	}
	if t.want == 0 {
		close(t.done) // no group: nothing to wait for
	}
	return t
}

func (t *tally) published(i int) { t.pubAt[i].Store(int64(time.Since(t.start))) }

// publishedAt stamps event i as published at its intended time (since
// start) when it went out late, and at the actual time otherwise.
func (t *tally) publishedAt(i int, intended time.Duration) {
	t.pubAt[i].Store(int64(min(intended, time.Since(t.start))))
}

// delivered records a delivery of index i to group g.
func (t *tally) delivered(g, i int) {
	if i >= len(t.pubAt) {
		t.warm.Add(1)
		return
	}
	if i < 0 {
		return
	}
	if t.counts[g][i].Add(1) == 1 {
		t.lat[g][i] = float32(time.Since(t.start)-time.Duration(t.pubAt[i].Load())) / float32(time.Millisecond)
		if t.total.Add(1) == t.want {
			t.doneOne.Do(func() { close(t.done) })
		}
	}
}

// result fills lost, duplicates and latency percentiles.
func (t *tally) result(r *Result) {
	var lats []float64
	for g := range t.counts {
		for i := range t.counts[g] {
			switch c := t.counts[g][i].Load(); {
			case c == 0:
				r.Lost++
			case c > 1:
				r.Duplicates += int(c - 1)
			}
			if t.counts[g][i].Load() > 0 && i%7 == 0 {
				lats = append(lats, float64(t.lat[g][i]))
			}
		}
	}
	sortFloats(lats)
	r.P50Ms = percentile(lats, 50)
	r.P99Ms = percentile(lats, 99)
}

// finish waits for every delivery (giving up after five minutes, or as long
// as publishing took if that is longer: what is missing then counts as
// lost) and fills the rates and the tally's figures.
func (t *tally) finish(ctx context.Context, o *Options, start time.Time, pubDur time.Duration, r *Result) error {
	select {
	case <-t.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(max(5*time.Minute, pubDur)):
		fmt.Fprintln(os.Stderr, "bench: timed out waiting for deliveries")
	}
	total := time.Since(start)
	if t.atDone != nil {
		if err := t.atDone(r); err != nil {
			return err
		}
	}
	r.PublishPerS = float64(o.N) / pubDur.Seconds()
	r.DeliverPerS = float64(t.total.Load()) / total.Seconds()
	t.result(r)
	return nil
}
