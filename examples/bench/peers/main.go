// Command peers runs the bench of examples/bench against other ways of
// moving events inside one process, for comparison on the same machine:
//
//   - watermill: Watermill's GoChannel pub/sub, one subscriber that acks
//     every message;
//   - jetstream: an embedded NATS server with JetStream, a memory stream, a
//     durable consumer with explicit acks, and PublishAsync with a window;
//   - handoff: a bare batched hand-off between two goroutines, one ack per
//     event (no leases, no cursor, no store): the ceiling of the machine.
//
// It publishes -n events of -payload bytes and prints one JSON line of the
// shape examples/bench prints. It is a module of its own, so that the
// library's go.mod never requires what the peers need.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"
)

// Result is the JSON line, the fields examples/bench prints.
type Result struct {
	Store       string  `json:"store"`
	Mode        string  `json:"mode"`
	N           int     `json:"n"`
	Payload     int     `json:"payload"`
	Groups      int     `json:"groups"`
	Publishers  int     `json:"publishers"`
	Consumers   int     `json:"consumers"`
	Publish     string  `json:"publish"`
	PublishPerS float64 `json:"publish_per_s"`
	DeliverPerS float64 `json:"deliver_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	Lost        int     `json:"lost"`
	Duplicates  int     `json:"duplicates"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
}

// A peer publishes events 0..n-1 (calling t.published before each) and
// delivers them to one consumer that calls t.delivered and acks each; it
// returns when every publish is done.
type peer func(ctx context.Context, n, payload, window int, t *tally) error

var peers = map[string]peer{
	"watermill": runWatermill,
	"jetstream": runJetStream,
	"handoff":   runHandoff,
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run() error {
	name := flag.String("peer", "handoff", "peer: watermill, jetstream or handoff")
	n := flag.Int("n", 1000000, "events to publish; 1 or more")
	payload := flag.Int("payload", 64, "payload size in bytes; 32 or more")
	window := flag.Int("window", 1024, "publishes in flight (jetstream's PublishAsync window, handoff's batch)")
	flag.Parse()
	p, ok := peers[*name]
	switch {
	case !ok:
		return fmt.Errorf("-peer: %q, want watermill, jetstream or handoff", *name)
	case *n < 1:
		return errors.New("-n: want 1 or more")
	case *payload < 32:
		return errors.New("-payload: want 32 or more")
	case *window < 1:
		return errors.New("-window: want 1 or more")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	t := newTally(*n)
	start := time.Now()
	t.start = start
	if err := p(ctx, *n, *payload, *window, t); err != nil {
		return err
	}
	pubDur := time.Since(start)
	select {
	case <-t.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Minute):
		fmt.Fprintln(os.Stderr, "peers: timed out waiting for deliveries")
	}
	total := time.Since(start)
	r := Result{
		Store: *name, Mode: "peer", N: *n, Payload: *payload, Groups: 1, Publishers: 1, Consumers: 1,
		Publish:     "pipelined",
		PublishPerS: float64(*n) / pubDur.Seconds(),
		DeliverPerS: float64(t.total.Load()) / total.Seconds(),
	}
	t.result(&r)
	r.PeakRSSMB = peakRSSMB()
	return json.NewEncoder(os.Stdout).Encode(r)
}
