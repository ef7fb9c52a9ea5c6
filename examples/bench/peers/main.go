// Command peers runs the bench of examples/bench against other ways of
// moving events inside one process, for comparison on the same machine:
//
//   - watermill: Watermill's GoChannel pub/sub, one subscriber that acks
//     every message;
//   - jetstream: an embedded NATS server with JetStream, a memory stream, a
//     durable consumer with explicit acks, and PublishAsync with a window;
//   - handoff: a bare batched hand-off between two goroutines, one ack per
//     event (no leases, no cursor, no store): the ceiling of the machine;
//   - centrifuge: the fan-out of examples/bench -mode fanout against a
//     centrifuge server (peer_centrifuge.go): -conns WebSocket subscribers
//     of one channel, -rate publications/s for -duration.
//
// It publishes -n events of -payload bytes (centrifuge: -rate x -duration)
// and prints one JSON line of the shape examples/bench prints. It is a module of its own, so that the
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
	// centrifuge: the fan-out's figures, as examples/bench -mode fanout.
	Rate  float64 `json:"rate,omitempty"`
	Conns int     `json:"conns,omitempty"`
	*FanoutFigures
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
	run := run
	if os.Getenv(centrifugeServerEnv) != "" {
		run = centrifugeServer // the server of -peer centrifuge
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run() error {
	name := flag.String("peer", "handoff", "peer: watermill, jetstream, handoff or centrifuge")
	n := flag.Int("n", 1000000, "events to publish; 1 or more")
	payload := flag.Int("payload", 64, "payload size in bytes; 32 or more")
	window := flag.Int("window", 1024, "publishes in flight (jetstream's PublishAsync window, handoff's batch)")
	conns := flag.Int("conns", 2000, "subscriber connections of -peer centrifuge; 1 or more")
	rate := flag.Float64("rate", 10, "publications/s of -peer centrifuge")
	duration := flag.Duration("duration", 30*time.Second, "how long -peer centrifuge publishes")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *name == "centrifuge" {
		switch {
		case *conns < 1:
			return errors.New("-conns: want 1 or more")
		case !(*rate > 0):
			return errors.New("-rate: want above 0")
		case *duration <= 0:
			return errors.New("-duration: want above 0")
		case *payload < 32:
			return errors.New("-payload: want 32 or more")
		}
		out, err := runCentrifuge(ctx, fanConfig{Conns: *conns, Rate: *rate, Duration: *duration, Payload: *payload})
		if err != nil {
			return err
		}
		r := Result{
			Store: "centrifuge", Mode: "fanout", N: out.Events, Payload: *payload, Publishers: 1, Consumers: *conns,
			Publish: "paced", PublishPerS: out.PublishPerS, DeliverPerS: out.DeliverPerS,
			P50Ms: out.P50Ms, P99Ms: out.P99Ms, Lost: out.Lost, Duplicates: out.Duplicates,
			PeakRSSMB: peakRSSMB(), Rate: *rate, Conns: *conns, FanoutFigures: &out.FanoutFigures,
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	p, ok := peers[*name]
	switch {
	case !ok:
		return fmt.Errorf("-peer: %q, want watermill, jetstream, handoff or centrifuge", *name)
	case *n < 1:
		return errors.New("-n: want 1 or more")
	case *payload < 32:
		return errors.New("-payload: want 32 or more")
	case *window < 1:
		return errors.New("-window: want 1 or more")
	}

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
