package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/examples/process/heartbeat"
)

// startDemo runs the seed's heartbeat -> process.state projector with three
// simulated processes, the last of which stops beating after 20s and turns
// stale. Subscribe to process.state to watch it. The returned function
// stops it and waits for its goroutines.
func startDemo(ctx context.Context, bus *event.Bus, log *slog.Logger) (func(), error) {
	p, err := heartbeat.NewProjector(bus, 5*time.Second)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := p.Run(ctx); err != nil {
			log.Error("demo projector stopped", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		heartbeat.Simulate(ctx, bus, time.Second, []heartbeat.SimProcess{
			{Heartbeat: heartbeat.Heartbeat{PID: 101, Name: "stt", Host: "demo"}},
			{Heartbeat: heartbeat.Heartbeat{PID: 102, Name: "tts", Host: "demo"}},
			{Heartbeat: heartbeat.Heartbeat{PID: 103, Name: "llm", Host: "demo"}, StopAfter: 20 * time.Second},
		})
	}()
	log.Info("demo running", "heartbeats", heartbeat.TopicHeartbeat, "state", heartbeat.TopicState)
	return func() { cancel(); wg.Wait() }, nil
}
