package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/promethean/promlib/event"
)

// Line is one report of a child to the harness, one JSON object a line.
// A child writes each line with one write(2) to its standard output (a
// pipe, which keeps writes of up to 4 KiB whole), and writes it before
// the step it reports is counted: a publish is reported acknowledged after
// Publish returned nil, a delivery is reported before it is acked. So a
// child killed at any point has reported all it must.
type Line struct {
	// K is the kind of line:
	//   ready    the child is publishing, or subscribed
	//   try      a publisher begins to publish ID (number N)
	//   ack      Publish of ID returned nil, storing it at Seq
	//   perr     a Publish of ID failed with R; the publisher tries again
	//   giveup   the publisher stopped trying ID (it was told to stop)
	//   deliver  a delivery of ID (Seq, partition P, attempt A, lease until
	//            DL) reached the handler
	//   settle   the handler's Op ("ack" or "nack") of that delivery returned R
	//   commit   the consumer committed partition P's cursor at Seq
	//   assign   the consumer took partition P (OnAssign)
	//   revoke   the consumer gave partition P up (OnRevoke)
	K   string `json:"k"`
	ID  string `json:"id,omitempty"`
	N   int    `json:"n,omitempty"`
	Seq uint64 `json:"seq,omitempty"`
	P   int    `json:"p"`
	A   int    `json:"a,omitempty"`
	Op  string `json:"op,omitempty"`
	// DL is a delivery's deadline, Unix ns: the Bus sets it to the
	// handler's start plus the ack timeout, so it dates the start even
	// when the child was stalled before it wrote the line.
	DL int64 `json:"dl,omitempty"`
	// R is an outcome: "ok", "stale" (ErrStaleAck), "not_in_flight"
	// (ErrNotInFlight), "closed" (ErrClosed), or an error's text.
	R string `json:"r,omitempty"`
	// T is when the child wrote the line, Unix nanoseconds.
	T int64 `json:"t"`
}

// reporter writes Lines to the harness.
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reporter) send(l Line) {
	l.T = time.Now().UnixNano()
	b, err := json.Marshal(l)
	if err != nil {
		panic(err) // a Line always encodes
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.w.Write(b); err != nil {
		// The harness is gone: nothing this child does counts any more.
		fmt.Fprintln(os.Stderr, "faults: report:", err)
		os.Exit(3)
	}
}

// outcome names the result of a publish, an ack or a nack.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, event.ErrStaleAck):
		return "stale"
	case errors.Is(err, event.ErrNotInFlight):
		return "not_in_flight"
	case errors.Is(err, event.ErrClosed):
		return "closed"
	default:
		return err.Error()
	}
}

// runChild runs the role o names until SIGTERM.
func runChild(o *Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	out := &reporter{w: os.Stdout}
	s, closeStore, err := openChildStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()
	switch o.Role {
	case "publisher":
		return runPublisher(ctx, o, s, out)
	case "consumer":
		return runConsumer(ctx, o, s, out)
	default:
		return fmt.Errorf("-role %q, want publisher or consumer", o.Role)
	}
}

// openChildStore opens the run's store, trying again for a minute while
// the database is away (a PostgreSQL server being restarted).
func openChildStore(ctx context.Context, o *Options) (event.Store, func(), error) {
	deadline := time.Now().Add(time.Minute)
	for {
		octx, cancel := context.WithTimeout(ctx, 20*time.Second)
		s, closeStore, err := openStore(octx, o.Store, o.DB, o.Schema)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return s, closeStore, err
		}
		fmt.Fprintf(os.Stderr, "faults %s.%d: open the store: %v (trying again)\n", o.Name, o.Inc, err)
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Payload is what a publisher publishes: who, and its number.
type Payload struct {
	Pub string `json:"pub"`
	N   int    `json:"n"`
}

// publishID is the id of publisher pub's record number n.
func publishID(pub string, n int) string { return pub + "-" + strconv.Itoa(n) }

// runPublisher publishes records o.Name-N for N from o.From, o.Rate a
// second, until ctx ends. Each is retried with the same id until it is
// acknowledged (a publish is idempotent by id); after ctx ends the one in
// hand is tried for a few seconds more, then given up.
func runPublisher(ctx context.Context, o *Options, s event.Store, out *reporter) error {
	b, err := event.NewBus(s, event.Config{Partitions: o.Partitions})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Close(cctx)
	}()
	out.send(Line{K: "ready"})
	interval := time.Duration(float64(time.Second) / o.Rate)
	next := time.Now()
	for n := o.From; ctx.Err() == nil; n++ {
		id := publishID(o.Name, n)
		payload, err := json.Marshal(Payload{Pub: o.Name, N: n})
		if err != nil {
			return err
		}
		out.send(Line{K: "try", ID: id, N: n})
		publishOne(ctx, b, id, n, payload, out)
		next = next.Add(interval)
		if now := time.Now(); next.Before(now.Add(-time.Second)) {
			next = now // far behind (a fault): no burst to catch up
		}
		sleepCtx(ctx, time.Until(next))
	}
	return nil
}

// publishOne publishes id until it is acknowledged, or until it has been
// tried for 15s after ctx ended.
func publishOne(ctx context.Context, b *event.Bus, id string, n int, payload []byte, out *reporter) {
	var giveUp time.Time
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rec, err := b.Publish(pctx, topic, payload, event.WithID(id))
		cancel()
		if err == nil {
			out.send(Line{K: "ack", ID: id, N: n, Seq: rec.Seq, P: rec.Partition})
			return
		}
		out.send(Line{K: "perr", ID: id, N: n, R: outcome(err)})
		if ctx.Err() != nil {
			if giveUp.IsZero() {
				giveUp = time.Now().Add(15 * time.Second)
			} else if time.Now().After(giveUp) {
				out.send(Line{K: "giveup", ID: id, N: n})
				return
			}
		}
		time.Sleep(wait)
	}
}

// commitReporter reports the consumer's cursor commits.
type commitReporter struct {
	event.NopObserver
	out *reporter
}

func (c commitReporter) Committed(t, g string, partition int, seq uint64) {
	if t == topic && g == group {
		c.out.send(Line{K: "commit", P: partition, Seq: seq})
	}
}

// runConsumer consumes the topic in the group until ctx ends, reporting
// every delivery before it settles it: it nacks a share o.Nack of first
// and second attempts and acks the rest, by hand, and reports the
// outcome.
func runConsumer(ctx context.Context, o *Options, s event.Store, out *reporter) error {
	member := o.Name + "." + strconv.Itoa(o.Inc)
	b, err := event.NewBus(s, event.Config{
		Partitions: o.Partitions,
		LeaseTTL:   o.Lease,
		MemberID:   member,
		Observer:   commitReporter{out: out},
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	h := fnv.New64a()
	h.Write([]byte(member))
	var mu sync.Mutex // the handler runs on one goroutine at a time; the lock says so to the race detector
	rng := rand.New(rand.NewPCG(uint64(o.Seed), h.Sum64()))
	handler := func(ctx context.Context, d *event.Delivery) error {
		out.send(Line{K: "deliver", ID: d.ID, Seq: d.Seq, P: d.Partition, A: d.Attempt, DL: d.Deadline.UnixNano()})
		mu.Lock()
		nack := d.Attempt <= 2 && rng.Float64() < o.Nack
		work := time.Duration(rng.IntN(2000)) * time.Microsecond
		mu.Unlock()
		time.Sleep(work)
		op, err := "ack", error(nil)
		if nack {
			op, err = "nack", d.Nack(ctx, "faults: a random nack")
		} else {
			err = d.Ack(ctx)
		}
		out.send(Line{K: "settle", ID: d.ID, Seq: d.Seq, P: d.Partition, A: d.Attempt, Op: op, R: outcome(err)})
		return nil
	}
	opts := []event.SubscribeOption{
		event.FromEarliest(),
		event.WithMaxInFlight(o.MaxInFlight),
		event.WithAckTimeout(o.AckTimeout),
		event.WithMaxAttempts(o.MaxAttempts),
		event.WithBackoff(50*time.Millisecond, time.Second),
		event.WithManualAck(),
		event.WithDrainTimeout(10 * time.Second),
		event.WithRebalanceHooks(
			func(_ context.Context, p int) { out.send(Line{K: "assign", P: p}) },
			func(_ context.Context, p int) { out.send(Line{K: "revoke", P: p}) },
		),
	}
	deadline := time.Now().Add(time.Minute)
	for {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err = b.Subscribe(sctx, topic, group, handler, opts...)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		fmt.Fprintf(os.Stderr, "faults %s: subscribe: %v (trying again)\n", member, err)
		sleepCtx(ctx, 200*time.Millisecond)
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(err, b.Close(cctx))
	}
	out.send(Line{K: "ready"})
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return b.Close(cctx)
}
