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
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/examples/internal/cli"
	"github.com/promethean/promlib/examples/process/heartbeat"
)

func main() {
	cli.Exit("process", runMain(os.Args[1:], os.Stderr))
}

// settings are the program's flags.
type settings struct {
	staleAfter, interval, runFor time.Duration
}

func parseFlags(args []string, help io.Writer) (*settings, error) {
	var s settings
	fs := flag.NewFlagSet("process", flag.ContinueOnError)
	fs.DurationVar(&s.staleAfter, "stale-after", 2*time.Second, "a process that has not beaten for this long is stale; above -interval")
	fs.DurationVar(&s.interval, "interval", 500*time.Millisecond, "heartbeat interval of the simulated processes; above 0")
	fs.DurationVar(&s.runFor, "for", 6*time.Second, "how long to run (0: until interrupted)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: process [flags]

Runs the heartbeat -> process.state projector on an in-memory bus with three
simulated processes (stt, tts, llm), one of which (llm) stops beating after
2s and turns stale, and prints every state change.

Environment: none.

Example:
  go run ./examples/process -interval 200ms -stale-after 1s -for 5s

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args, help); err != nil {
		return nil, err
	}
	if err := cli.First(
		cli.Positive("interval", s.interval, "500ms"),
		cli.NotNegative("for", s.runFor, "until interrupted"),
	); err != nil {
		return nil, err
	}
	if s.staleAfter <= s.interval {
		return nil, cli.Usagef("-stale-after: %v, want a duration above -interval (%v), or every process turns stale between two beats", s.staleAfter, s.interval)
	}
	return &s, nil
}

func runMain(args []string, help io.Writer) error {
	s, err := parseFlags(args, help)
	if err != nil {
		return err
	}
	return run(s.staleAfter, s.interval, s.runFor)
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
