// Command bench measures promlib end to end: it publishes n events,
// consumes them in one or more groups with acks, and prints one JSON line:
//
//	{"store":"memory","mode":"bus","n":1000000,"publish_per_s":...,"deliver_per_s":...,
//	 "p50_ms":...,"p99_ms":...,"lost":0,"duplicates":0,"peak_rss_mb":...}
//
// lost and duplicates are counted per group against what was published;
// p50/p99 are the publish-to-handler latencies. Run it with -h for the flags.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/promethean/promlib/examples/internal/cli"
	"github.com/promethean/promlib/storeurl"
)

// Options are the bench's settings, shared by every store and mode.
type Options struct {
	// Store is -store as given; Location is it parsed.
	Store       string
	Location    storeurl.Location
	Mode        string
	N           int
	Payload     int
	Groups      int
	Publishers  int
	Consumers   int
	MaxInFlight int
	Partitions  int
	CPUProfile  string
	Trace       string
	// HeapProfile is written when every delivery of -mode bus is in, or
	// when every connection of -mode ws-idle is set up.
	HeapProfile string
	// Sync publishes with Bus.Publish, one event at a time per publisher;
	// otherwise each publisher pipelines through an event.Publisher with
	// a window of Window events (0: the Publisher's default).
	Sync   bool
	Window int
	// Rate paces the publishers to this many events/s in all (0: as fast
	// as they can). Latency is then measured from each event's intended
	// send time.
	Rate float64
	// Conns are the idle connections of -mode ws-idle, and the
	// subscriber connections of -mode fanout.
	Conns int
	// Duration is how long -mode fanout publishes (at Rate).
	Duration time.Duration
	// GroupPerConn makes each connection of -mode fanout a consumer
	// group of its own that acks every event, instead of a live
	// subscriber.
	GroupPerConn bool
	// Keys is how many distinct keys the events of -mode bus get, round
	// robin (0: no key); KeyOrdered subscribes with event.WithKeyOrdered.
	Keys       int
	KeyOrdered bool
	// Warmup events go through the same Bus, topic and subscriptions
	// before the measured ones, uncounted (-mode bus).
	Warmup int
	// Topics spreads the events of -mode bus over this many topics, event
	// i to topic i mod Topics, each with Groups groups (see topicOf).
	Topics int
	// Raw measures the raw baseline of a durable store after -mode bus
	// (raw_insert_per_s, raw_commit_each_per_s); false skips it.
	Raw bool
}

// Result is the JSON line the bench prints.
type Result struct {
	Store      string `json:"store"`
	Mode       string `json:"mode"`
	N          int    `json:"n"`
	Payload    int    `json:"payload"`
	Groups     int    `json:"groups"`
	Publishers int    `json:"publishers"`
	Consumers  int    `json:"consumers"`
	Publish    string `json:"publish"`
	// Window is the publishes in flight per pipelined publisher.
	Window      int     `json:"window,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	Keys        int     `json:"keys,omitempty"`
	KeyOrdered  bool    `json:"key_ordered,omitempty"`
	Warmup      int     `json:"warmup,omitempty"`
	PublishPerS float64 `json:"publish_per_s"`
	DeliverPerS float64 `json:"deliver_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	Lost        int     `json:"lost"`
	Duplicates  int     `json:"duplicates"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	// Sched is the scheduling policy the bench ran under (see schedPolicy).
	Sched       string  `json:"sched,omitempty"`
	RawInsertPS float64 `json:"raw_insert_per_s,omitempty"`
	RawEchoPerS float64 `json:"raw_echo_per_s,omitempty"`
	// With -sync on a durable store: the -publishers goroutines each
	// committing one row per call without the store (see commitEach), the
	// p99 of such a call, the p99 of a Bus.Publish call, and publish_per_s
	// over raw_commit_each_per_s.
	RawCommitEachPerS  float64 `json:"raw_commit_each_per_s,omitempty"`
	RawCommitEachP99Ms float64 `json:"raw_commit_each_p99_ms,omitempty"`
	PublishCallP99Ms   float64 `json:"publish_call_p99_ms,omitempty"`
	PublishOverEach    float64 `json:"publish_over_commit_each,omitempty"`
	StoreOverRaw       float64 `json:"publish_over_raw,omitempty"`
	DeliverOverRaw     float64 `json:"deliver_over_raw,omitempty"`
	// On PostgreSQL, pipelined: the same rows inserted as one array per
	// column (INSERT ... SELECT FROM unnest, as the store inserts them),
	// and publish_per_s over it.
	RawArrayInsertPS float64 `json:"raw_array_insert_per_s,omitempty"`
	StoreOverRawArr  float64 `json:"publish_over_raw_array,omitempty"`
	WSOverEcho       float64 `json:"deliver_over_echo,omitempty"`
	// DeliverAckPerS (ws) drains stored events over the gateway.
	DeliverAckPerS float64 `json:"deliver_ack_per_s,omitempty"`
	// ws-idle: the gateway's cost per idle subscribed connection.
	Conns             int     `json:"conns,omitempty"`
	BytesPerConn      float64 `json:"bytes_per_conn,omitempty"`
	HeapStackPerConn  float64 `json:"heap_stack_per_conn,omitempty"`
	GoroutinesPerConn float64 `json:"goroutines_per_conn,omitempty"`
	NoFileSoft        uint64  `json:"nofile_soft,omitempty"`
	NoFileHard        uint64  `json:"nofile_hard,omitempty"`
	// -mode bus: the cost as work grows (see growth.go): per consumer
	// group and per event beyond its payload.
	Topics            int     `json:"topics,omitempty"`
	SubscribeS        float64 `json:"subscribe_s,omitempty"`
	RSSBytesPerGroup  float64 `json:"rss_bytes_per_group,omitempty"`
	LiveBytesPerGroup float64 `json:"live_bytes_per_group,omitempty"`
	RSSBytesPerEvent  float64 `json:"rss_bytes_per_event,omitempty"`
	LiveBytesPerEvent float64 `json:"live_bytes_per_event,omitempty"`
	FileBytesPerEvent float64 `json:"file_bytes_per_event,omitempty"`
	// The first group's deliveries/s over the first and the last tenth of
	// its deliveries while publishing went on (see tally.tenths).
	DeliverPerSFirstTenth float64 `json:"deliver_per_s_first_tenth,omitempty"`
	DeliverPerSLastTenth  float64 `json:"deliver_per_s_last_tenth,omitempty"`
	FileMB                float64 `json:"file_mb,omitempty"`
	WALMB                 float64 `json:"wal_mb,omitempty"`
	// fanout: the figures of fanout.go (subscription, max_ms, connect_s,
	// the server's RSS and CPU, ...).
	*FanoutFigures
}

// A ModeFunc runs the bench in one mode over a backend and fills r.
type ModeFunc func(ctx context.Context, o *Options, be Backend, r *Result) error

var modes = map[string]ModeFunc{"bus": runBus}

func main() {
	if spec := os.Getenv(fanoutServerEnv); spec != "" {
		cli.Exit("bench", fanoutServer(spec)) // the server of -mode fanout
		return
	}
	if spec := os.Getenv(wsIdleChildEnv); spec != "" {
		cli.Exit("bench", wsIdleChild(spec)) // the client side of -mode ws-idle
		return
	}
	cli.Exit("bench", run(os.Args[1:], os.Getenv, os.Stderr))
}

// parseFlags reads the command line; -h prints to help.
func parseFlags(args []string, getenv func(string) string, help io.Writer) (*Options, error) {
	var o Options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.Store, "store", "memory", "where the events are kept, as the hub's -store: memory, sqlite:PATH (a new file, removed at the end), postgres://... (a schema of its own, dropped at the end) or mongodb://... (a database of its own, dropped at the end)")
	fs.StringVar(&o.Mode, "mode", "bus", "mode: "+strings.Join(slices.Sorted(mapsKeys(modes)), ", "))
	fs.IntVar(&o.N, "n", 100000, "events to publish; 1 or more")
	fs.IntVar(&o.Payload, "payload", 64, "payload size in bytes; 32 or more")
	fs.IntVar(&o.Groups, "groups", 1, "consumer groups, each gets every event; 0 (-mode bus) publishes with no consumer, to measure publishing alone")
	fs.IntVar(&o.Publishers, "publishers", 1, "concurrent publishers; 1 or more")
	fs.IntVar(&o.Consumers, "consumers", 1, "subscribers per group; 1 or more")
	fs.IntVar(&o.MaxInFlight, "max-inflight", 1000, "max in flight per subscriber; 1 or more")
	fs.IntVar(&o.Partitions, "partitions", 1, "partitions per topic; 1 or more")
	fs.StringVar(&o.CPUProfile, "cpu-profile", "", "write a CPU profile to this file")
	fs.StringVar(&o.HeapProfile, "heap-profile", "", "write a heap profile to this file when every delivery of -mode bus is in, or every connection of -mode ws-idle is set up (after a collection)")
	fs.StringVar(&o.Trace, "trace", "", "write a runtime execution trace to this file (go tool trace)")
	fs.BoolVar(&o.Sync, "sync", false, "publish with the synchronous Bus.Publish (default: pipelined, see -window)")
	fs.IntVar(&o.Window, "window", 0, "publishes in flight per pipelined publisher; 0: the library's default (event.PublisherConfig, wsclient.Options)")
	fs.Float64Var(&o.Rate, "rate", 0, "offered load in events/s over all publishers; 0: as fast as they can")
	fs.IntVar(&o.Conns, "conns", 2000, "idle connections of -mode ws-idle, subscribers of -mode fanout; 1 or more")
	fs.DurationVar(&o.Duration, "duration", 30*time.Second, "how long -mode fanout publishes -rate events/s")
	fs.BoolVar(&o.GroupPerConn, "group-per-conn", false, "-mode fanout subscribes each connection in a consumer group of its own (viewer-<i>) that acks every event, instead of live; -mode ws-idle in a group of its own (idle-<i>) instead of one they share")
	fs.IntVar(&o.Warmup, "warmup", 0, "events of -mode bus published and consumed before the measured -n, through the same bus and subscriptions, and not counted; 0 or more")
	fs.IntVar(&o.Keys, "keys", 0, "distinct keys of the events of -mode bus, round robin; 0 (no key) or more")
	fs.BoolVar(&o.KeyOrdered, "key-ordered", false, "-mode bus subscribes key-ordered: each key's events in order, keys in parallel")
	fs.IntVar(&o.Topics, "topics", 1, "topics of -mode bus, event i to topic i mod -topics, each with -groups groups; 1 or more")
	fs.BoolVar(&o.Raw, "raw", true, "measure the raw baseline of SQLite, PostgreSQL and MongoDB after -mode bus (raw_insert_per_s; with -sync raw_commit_each_per_s); -raw=false skips it, as for long runs")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: bench [flags]

Measures promlib end to end: publishes -n events (pipelined, -window
in flight per publisher; -sync for one at a time; -rate paces them, and
latency then counts from each event's intended send time), consumes them in -groups
consumer groups with acks, and prints one JSON line: publish_per_s,
deliver_per_s, p50_ms and p99_ms (publish to handler), lost and duplicates
(per group), peak_rss_mb, and a raw baseline of the same machine
(raw_insert_per_s for MongoDB, SQLite and PostgreSQL, raw_echo_per_s for
WebSocket). With -sync, publish_call_p99_ms is the p99 of one Bus.Publish
call, and on MongoDB, SQLite and PostgreSQL raw_commit_each_per_s is the
baseline of waiting publishers: -publishers goroutines each committing
their own single-row INSERT (MongoDB: InsertOne) per call, with the p99
of such a call (raw_commit_each_p99_ms) and publish_over_commit_each.

-mode bus also prints the cost as work grows: per consumer group (over
-topics topics, event i to topic i mod -topics, each with -groups groups)
the RSS and live heap and stacks it added (rss_bytes_per_group,
live_bytes_per_group, subscribe_s), and per event beyond its payload the
growth of RSS (rss_bytes_per_event), of the live heap and stacks after a
collection (live_bytes_per_event), the first group's deliveries/s over
the first and the last tenth of its deliveries while publishing went on
(deliver_per_s_first_tenth,
deliver_per_s_last_tenth) and, on SQLite, of the file and its
-wal (file_bytes_per_event, file_mb, wal_mb).

-mode fanout runs a gateway in a child process and opens -conns
WebSocket connections to it, each a live subscriber of one topic (or with
-group-per-conn a consumer group of its own), publishes -rate events/s
for -duration, and prints the latency of every (connection, event) pair
(p50_ms, p99_ms, max_ms), lost, duplicates, connect_s, and the gateway
process's RSS (before, idle, end, bytes_per_conn) and CPU seconds.

-store takes the hub's grammar: memory (the default); sqlite:PATH, a new
SQLite file at PATH (its directory must exist), removed at the end;
postgres://... or postgresql://..., a schema of its own in that database,
dropped at the end; mongodb://... or mongodb+srv://..., a database of its
own on that server, dropped at the end.

Environment: none. tools/pgtest/with-postgres.sh and
tools/mongotest/with-mongo.sh run a command with PG_URL and MONGO_URL set
to a throwaway server, for -store "$PG_URL" and -store "$MONGO_URL".

Examples:
  go run ./examples/bench -store memory -n 1000000 -payload 64
  go run ./examples/bench -mode ws -n 100000 -max-inflight 500
  go run ./examples/bench -store sqlite:bench.db -n 20000 -publishers 16
  tools/pgtest/with-postgres.sh sh -c 'go run ./examples/bench -store "$PG_URL" -n 20000'
  go run ./examples/bench -mode fanout -conns 1000 -rate 10 -duration 30s

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args, help); err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &o, nil
}

func run(args []string, getenv func(string) string, help io.Writer) error {
	o, err := parseFlags(args, getenv, help)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for _, rec := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{{o.CPUProfile, pprof.StartCPUProfile, pprof.StopCPUProfile}, {o.Trace, trace.Start, trace.Stop}} {
		if rec.path == "" {
			continue
		}
		f, err := os.Create(rec.path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := rec.start(f); err != nil {
			return err
		}
		defer rec.stop()
	}

	mode := modes[o.Mode]
	be, err := openBackend(ctx, o)
	if err != nil {
		return fmt.Errorf("open store %s: %w", o.Location, err)
	}
	defer be.Close()
	r := Result{
		Store: string(o.Location.Kind), Mode: o.Mode, N: o.N, Payload: o.Payload, Groups: o.Groups,
		Publishers: o.Publishers, Consumers: o.Consumers, Publish: "pipelined", Rate: o.Rate,
		Keys: o.Keys, KeyOrdered: o.KeyOrdered, Warmup: o.Warmup,
	}
	if o.Sync {
		r.Publish = "sync"
	}
	if err := mode(ctx, o, be, &r); err != nil {
		return err
	}
	r.PeakRSSMB = peakRSSMB()
	r.Sched = schedPolicy()
	return json.NewEncoder(os.Stdout).Encode(r)
}

// validate checks the options; its error is a one-line [cli.UsageError]
// naming the first bad flag.
func (o *Options) validate() error {
	if err := o.parseStore(); err != nil {
		return err
	}
	if _, ok := modes[o.Mode]; !ok {
		return cli.Usagef("-mode: %q, want one of %s", o.Mode, strings.Join(slices.Sorted(mapsKeys(modes)), ", "))
	}
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{{"n", o.N, 1}, {"payload", o.Payload, 32}, {"groups", o.Groups, 0}, {"publishers", o.Publishers, 1},
		{"consumers", o.Consumers, 1}, {"max-inflight", o.MaxInFlight, 1}, {"partitions", o.Partitions, 1},
		{"window", o.Window, 0}, {"conns", o.Conns, 1}, {"topics", o.Topics, 1}} {
		if err := cli.AtLeast(f.name, f.v, f.min); err != nil {
			return err
		}
	}
	if o.Groups == 0 && o.Mode != "bus" {
		return cli.Usagef("-groups 0 (publish only): only with -mode bus, not %s", o.Mode)
	}
	if o.Rate < 0 || o.Rate != o.Rate {
		return cli.Usagef("-rate: %v, want 0 (unpaced) or more events/s", o.Rate)
	}
	if err := cli.AtLeast("keys", o.Keys, 0); err != nil {
		return err
	}
	if err := cli.AtLeast("warmup", o.Warmup, 0); err != nil {
		return err
	}
	if o.Mode == "fanout" {
		switch {
		case o.Rate <= 0:
			return cli.Usagef("-rate: %v, want events/s above 0 with -mode fanout (e.g. 10)", o.Rate)
		case o.Duration <= 0:
			return cli.Usagef("-duration: %v, want above 0", o.Duration)
		case o.Location.Kind != storeurl.KindMemory:
			return cli.Usagef("-store: %s, -mode fanout runs over memory only", o.Location)
		}
	} else if o.GroupPerConn && o.Mode != "ws-idle" {
		return cli.Usagef("-group-per-conn: only with -mode fanout or ws-idle, not %s", o.Mode)
	}
	if (o.Keys > 0 || o.KeyOrdered || o.Warmup > 0 || o.Topics > 1) && o.Mode != "bus" {
		return cli.Usagef("-keys, -key-ordered, -warmup and -topics: only with -mode bus, not %s", o.Mode)
	}
	return nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// percentile returns the p-th percentile (0..100) of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

func sortFloats(v []float64) { sort.Float64s(v) }
