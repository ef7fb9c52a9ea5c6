// Command process runs the seed's heartbeat -> process.state projector on
// an in-memory bus with three simulated processes, one of which stops
// beating after a few seconds, and prints every state change:
//
//	go run ./examples/process
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/examples/process/heartbeat"
)

func main() {
	staleAfter := flag.Duration("stale-after", 2*time.Second, "a process that has not beaten for this long is stale")
	interval := flag.Duration("interval", 500*time.Millisecond, "heartbeat interval of the simulated processes")
	runFor := flag.Duration("for", 6*time.Second, "how long to run (0: until interrupted)")
	flag.Parse()
	if err := run(*staleAfter, *interval, *runFor); err != nil {
		fmt.Fprintln(os.Stderr, "process:", err)
		os.Exit(1)
	}
}

func run(staleAfter, interval, runFor time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, runFor)
		defer cancel()
	}
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		return err
	}
	defer bus.Close(context.Background())

	p, err := heartbeat.NewProjector(bus, staleAfter)
	if err != nil {
		return err
	}
	// Print what the projector publishes.
	_, err = event.SubscribeJSON(ctx, bus, heartbeat.TopicState, "printer",
		func(ctx context.Context, s heartbeat.ProcessState, d *event.Delivery) error {
			fmt.Printf("%s  %-16s %-5s cpu %5.1f%%  mem %5.0f MB\n",
				time.Now().Format("15:04:05.000"), s.ProcessID, s.Status, s.CPUPct, s.MemMB)
			return nil
		}, event.FromEarliest())
	if err != nil {
		return err
	}
	simDone := make(chan struct{})
	go func() {
		defer close(simDone)
		heartbeat.Simulate(ctx, bus, interval, []heartbeat.SimProcess{
			{Heartbeat: heartbeat.Heartbeat{PID: 101, Name: "stt", Host: "dev"}},
			{Heartbeat: heartbeat.Heartbeat{PID: 102, Name: "tts", Host: "dev"}},
			{Heartbeat: heartbeat.Heartbeat{PID: 103, Name: "llm", Host: "dev"}, StopAfter: 2 * time.Second},
		})
	}()
	defer func() { <-simDone }()
	return p.Run(ctx)
}
