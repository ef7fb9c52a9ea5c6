package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// childEnv marks a child process of the harness: the program (or the test
// binary, see TestMain) runs the role its flags name instead of a harness.
const childEnv = "FAULTS_CHILD"

// Options are the settings of a run, shared by the harness and its
// children (each child gets them on its command line).
type Options struct {
	Store       string        // sqlite or postgres
	Publishers  int           // publisher processes
	Consumers   int           // consumer processes, one group
	Partitions  int           // of the topic
	Lease       time.Duration // the group's partition lease (event.Config.LeaseTTL)
	AckTimeout  time.Duration // a delivery's lease
	Duration    time.Duration // of the fault phase
	Seed        int64
	Rate        float64 // publishes per second of each publisher
	MaxInFlight int
	MaxAttempts int
	Nack        float64       // the share of first and second attempts a consumer nacks
	FaultEvery  time.Duration // mean time between faults
	Faults      string        // the kinds of fault, comma-separated
	Drain       time.Duration // how long the group may take to drain after the faults
	Dir         string        // the run's files; a temporary directory when empty
	Keep        bool          // keep Dir after a run that passed
	Verbose     bool          // say each fault on stderr

	// The child's own settings.
	Role   string // publisher or consumer
	Name   string // p0, c1, ...
	Inc    int    // incarnation of Name, from 1
	From   int    // a publisher's first number
	DB     string // the SQLite file, or the PostgreSQL URL with the child's application_name
	Schema string // PostgreSQL schema of the run
}

// Fault kinds.
const (
	faultKill      = "kill"
	faultStop      = "stop"
	faultPGTerm    = "pg_terminate"
	faultPGRestart = "pg_restart"
)

var allFaults = []string{faultKill, faultStop, faultPGTerm, faultPGRestart}

const (
	topic = "faults"
	group = "g"
)

func (o *Options) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.Store, "store", "sqlite", "the store: sqlite or postgres (PG_URL, or a throwaway cluster the harness starts)")
	fs.IntVar(&o.Publishers, "publishers", 3, "publisher processes")
	fs.IntVar(&o.Consumers, "consumers", 3, "consumer processes of the group")
	fs.IntVar(&o.Partitions, "partitions", 4, "partitions of the topic")
	fs.DurationVar(&o.Lease, "lease", 2*time.Second, "the group's partition lease (event.Config.LeaseTTL)")
	fs.DurationVar(&o.AckTimeout, "ack-timeout", 0, "a delivery's lease (default twice -lease)")
	fs.DurationVar(&o.Duration, "duration", 60*time.Second, "how long faults are injected")
	fs.Int64Var(&o.Seed, "seed", 1, "seed of the faults' schedule and of the consumers' nacks")
	fs.Float64Var(&o.Rate, "rate", 40, "publishes per second of each publisher")
	fs.IntVar(&o.MaxInFlight, "max-inflight", 4, "event.WithMaxInFlight of each consumer")
	fs.IntVar(&o.MaxAttempts, "max-attempts", 10, "the group's MaxAttempts")
	fs.Float64Var(&o.Nack, "nack", 0.05, "share of first and second attempts that consumers nack")
	fs.DurationVar(&o.FaultEvery, "fault-every", time.Second, "mean time between faults")
	fs.StringVar(&o.Faults, "faults", strings.Join(allFaults, ","), "kinds of fault, comma-separated: "+strings.Join(allFaults, ", "))
	fs.DurationVar(&o.Drain, "drain-timeout", 90*time.Second, "how long the group may take to drain after the faults")
	fs.StringVar(&o.Dir, "dir", "", "directory of the run's files (default a temporary one, removed after a run that passed)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the run's files after a run that passed")
	fs.BoolVar(&o.Verbose, "v", false, "say each fault and phase on stderr")

	fs.StringVar(&o.Role, "role", "", "run as a child: publisher or consumer (set by the harness)")
	fs.StringVar(&o.Name, "name", "", "a child's name (set by the harness)")
	fs.IntVar(&o.Inc, "inc", 1, "a child's incarnation (set by the harness)")
	fs.IntVar(&o.From, "from", 0, "a publisher's first number (set by the harness)")
	fs.StringVar(&o.DB, "db", "", "a child's database (set by the harness)")
	fs.StringVar(&o.Schema, "schema", "", "a child's PostgreSQL schema (set by the harness)")
}

// validate reports every problem of o's harness settings, joined.
func (o *Options) validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("-%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if o.Store != "sqlite" && o.Store != "postgres" {
		bad("store", "%q, want sqlite or postgres", o.Store)
	}
	if o.Publishers < 1 {
		bad("publishers", "%d, want at least 1", o.Publishers)
	}
	if o.Consumers < 1 {
		bad("consumers", "%d, want at least 1", o.Consumers)
	}
	if o.Partitions < 1 || o.Partitions > 4096 {
		bad("partitions", "%d, want 1 to 4096", o.Partitions)
	}
	if o.Lease < 100*time.Millisecond {
		bad("lease", "%v, want at least 100ms", o.Lease)
	}
	if o.AckTimeout < 0 {
		bad("ack-timeout", "%v is negative", o.AckTimeout)
	}
	if o.Duration < 0 {
		bad("duration", "%v is negative", o.Duration)
	}
	if o.Rate <= 0 {
		bad("rate", "%v, want more than 0", o.Rate)
	}
	if o.MaxInFlight < 1 {
		bad("max-inflight", "%d, want at least 1", o.MaxInFlight)
	}
	if o.MaxAttempts < 3 {
		bad("max-attempts", "%d, want at least 3 (the consumers nack first and second attempts)", o.MaxAttempts)
	}
	if o.Nack < 0 || o.Nack >= 1 {
		bad("nack", "%v, want 0 to below 1", o.Nack)
	}
	if o.FaultEvery <= 0 {
		bad("fault-every", "%v, want more than 0", o.FaultEvery)
	}
	if _, err := o.faultKinds(); err != nil {
		bad("faults", "%v", err)
	}
	if o.Drain <= 0 {
		bad("drain-timeout", "%v, want more than 0", o.Drain)
	}
	return errors.Join(errs...)
}

// faultKinds returns the kinds of -faults.
func (o *Options) faultKinds() ([]string, error) {
	var out []string
	for _, k := range strings.Split(o.Faults, ",") {
		k = strings.TrimSpace(k)
		switch k {
		case "", "none":
		case faultKill, faultStop, faultPGTerm, faultPGRestart:
			out = append(out, k)
		default:
			return nil, fmt.Errorf("unknown fault %q, want some of %s", k, strings.Join(allFaults, ", "))
		}
	}
	return out, nil
}

func (o *Options) setDefaults() {
	if o.AckTimeout == 0 {
		o.AckTimeout = 2 * o.Lease
	}
}

// parse parses args into Options.
func parse(args []string, help io.Writer) (*Options, error) {
	var o Options
	fs := flag.NewFlagSet("faults", flag.ContinueOnError)
	fs.SetOutput(help)
	o.flags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: faults takes flags only (see -h)", fs.Arg(0))
	}
	o.setDefaults()
	return &o, nil
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain runs the harness, or the child its flags name, and returns the
// exit status: 0 for a run that passed, 1 for one that failed, 2 for a bad
// command line.
func realMain(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "faults:", err)
		return 2
	}
	if o.Role != "" {
		if err := runChild(o); err != nil {
			fmt.Fprintf(stderr, "faults %s.%d: %v\n", o.Name, o.Inc, err)
			return 1
		}
		return 0
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(stderr, "faults:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, o, stderr)
	if rep != nil {
		if werr := rep.writeJSON(stdout); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "faults:", err)
		return 1
	}
	if !rep.OK {
		return 1
	}
	return 0
}
