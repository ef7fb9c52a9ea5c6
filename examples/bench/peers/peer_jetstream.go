package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runJetStream runs an embedded NATS server with JetStream in this
// process, a memory stream, a durable consumer with explicit acks that
// acks every message, and publishes with PublishAsync (window in flight).
// The server and the connection live until every event is delivered.
func runJetStream(ctx context.Context, n, payload, window int, t *tally) (err error) {
	dir, err := os.MkdirTemp("", "peers-jetstream-")
	if err != nil {
		return err
	}
	var ns *server.Server
	var nc *nats.Conn
	stop := func() {
		if nc != nil {
			nc.Close()
		}
		if ns != nil {
			ns.Shutdown()
		}
		_ = os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			stop()
			return
		}
		go func() {
			<-t.done
			stop()
		}()
	}()
	ns, err = server.NewServer(&server.Options{JetStream: true, StoreDir: dir, DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		return err
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		return errors.New("jetstream: the embedded server did not start")
	}
	if nc, err = nats.Connect("", nats.InProcessServer(ns)); err != nil {
		return err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window))
	if err != nil {
		return err
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "BENCH", Subjects: []string{"bench.events"}, Storage: jetstream.MemoryStorage,
	})
	if err != nil {
		return err
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1000,
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		t.delivered(payloadIndex(m.Data()))
		_ = m.Ack()
	})
	if err != nil {
		return err
	}
	go func() {
		<-t.done
		cc.Stop()
	}()

	// Every future is checked, oldest first, before its slot in the ring
	// is reused, as examples/bench checks its pipelined results.
	ring := make([]jetstream.PubAckFuture, window)
	check := func(k int) error {
		f := ring[k]
		if f == nil {
			return nil
		}
		ring[k] = nil
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return fmt.Errorf("publish: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range n {
		if err := check(i % window); err != nil {
			return err
		}
		p := makePayload(i, payload)
		t.published(i)
		f, err := js.PublishAsync("bench.events", p)
		if err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
		ring[i%window] = f
	}
	for k := range ring {
		if err := check(k); err != nil {
			return err
		}
	}
	return nil
}
