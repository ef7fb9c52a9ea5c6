package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/promethean/promlib/storeurl"
)

// Cost as work grows (-mode bus): what a run adds to the process and to
// the store, per event beyond its payload and per consumer group.
//
// The figures are differences between snapshots taken by runBus:
//
//   - before subscribing, with the tally's arrays already resident (the
//     bench's own bookkeeping, 8 bytes per event and group and 16 per
//     event, is not the store's and is left out of every figure);
//   - after every subscription is made: per group, the RSS and the live
//     heap and stacks (after a collection) it added;
//   - before the first measured publish (after any warm-up);
//   - when every delivery is in: per event, RSS growth (as it is, garbage
//     not yet collected included), live heap and stacks growth (after a
//     collection), and for a SQLite store the growth of its file and its
//     -wal, each divided by -n, minus the payload.

// snapshot is the process's and the store's size at one moment.
type snapshot struct {
	rss  int64 // resident set, bytes
	live int64 // heap in use and goroutine stacks after a collection
	file int64 // a SQLite store's file and its -wal, bytes; 0 for others
	wal  int64 // of file, the -wal's
	at   time.Time
}

// takeSnapshot reads the RSS as it is, then collects garbage and reads
// the live heap and stacks, and the SQLite file's size.
func takeSnapshot(o *Options) (snapshot, error) {
	s := snapshot{rss: int64(rssBytes()), at: time.Now()}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.live = int64(ms.HeapAlloc + ms.StackInuse)
	if o.Location.Kind == storeurl.KindSQLite {
		for _, suffix := range []string{"", "-wal"} {
			fi, err := os.Stat(o.Location.Path + suffix)
			if err != nil && !os.IsNotExist(err) {
				return s, fmt.Errorf("size of the SQLite file: %w", err)
			}
			if err == nil {
				s.file += fi.Size()
				if suffix == "-wal" {
					s.wal = fi.Size()
				}
			}
		}
	}
	return s, nil
}

// growth holds runBus's snapshots and fills the Result's figures.
type growth struct {
	o                       *Options
	t                       *tally
	start, subscribed, pub0 snapshot
}

// startGrowth makes the tally's arrays resident, so that what they take is
// in the first snapshot and not counted as the store's, and takes it.
func startGrowth(o *Options, t *tally) (*growth, error) {
	t.touch()
	s, err := takeSnapshot(o)
	if err != nil {
		return nil, err
	}
	return &growth{o: o, t: t, start: s}, nil
}

// groups is the consumer groups of the run, over all topics.
func (g *growth) groups() int { return g.o.Topics * g.o.Groups }

// afterSubscribe takes the snapshot after every subscription is made.
func (g *growth) afterSubscribe() (err error) {
	g.subscribed, err = takeSnapshot(g.o)
	return err
}

// beforePublish takes the snapshot the per-event figures start from.
func (g *growth) beforePublish() (err error) {
	g.pub0, err = takeSnapshot(g.o)
	return err
}

// finish takes the last snapshot, when every delivery is in, and fills r.
func (g *growth) finish(r *Result) error {
	end, err := takeSnapshot(g.o)
	if err != nil {
		return err
	}
	if err := writeHeapProfile(g.o.HeapProfile); err != nil {
		return err
	}
	n, groups, payload := float64(g.o.N), float64(g.groups()), float64(g.o.Payload)
	r.Topics = g.o.Topics
	r.SubscribeS = g.subscribed.at.Sub(g.start.at).Seconds()
	if groups > 0 { // none with -groups 0
		r.RSSBytesPerGroup = float64(g.subscribed.rss-g.start.rss) / groups
		r.LiveBytesPerGroup = float64(g.subscribed.live-g.start.live) / groups
	}
	r.RSSBytesPerEvent = float64(end.rss-g.pub0.rss)/n - payload
	r.LiveBytesPerEvent = float64(end.live-g.pub0.live)/n - payload
	r.DeliverPerSFirstTenth, r.DeliverPerSLastTenth = g.t.tenths()
	if g.o.Location.Kind == storeurl.KindSQLite {
		r.FileBytesPerEvent = float64(end.file-g.pub0.file)/n - payload
		r.FileMB = float64(end.file) / (1 << 20)
		r.WALMB = float64(end.wal) / (1 << 20)
	}
	return nil
}

// writeHeapProfile writes the heap profile of -heap-profile, if given.
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}

// tenths returns the deliveries per second of the first group over the
// first tenth and the last tenth of its deliveries made while events were
// still being published, in the order they happened: the rate when the
// store held few events and when it held nearly all, within one run (and
// so at one machine load). The deliveries after the last publish are left
// out: the consumers then have the CPUs to themselves. 0, 0 when fewer
// than 20 deliveries are in.
func (t *tally) tenths() (first, last float64) {
	if len(t.counts) == 0 {
		return 0, 0
	}
	var end int64 // the last publish, ns since start
	for i := range t.pubAt {
		end = max(end, t.pubAt[i].Load())
	}
	endMs := float64(end) / float64(time.Millisecond)
	at := make([]float64, 0, len(t.pubAt)) // ms since start
	for i := range t.pubAt {
		if t.counts[0][i].Load() == 0 {
			continue
		}
		if d := float64(t.pubAt[i].Load())/float64(time.Millisecond) + float64(t.lat[0][i]); d <= endMs {
			at = append(at, d)
		}
	}
	tenth := len(at) / 10
	if tenth < 2 {
		return 0, 0
	}
	sortFloats(at)
	rate := func(lo, hi float64) float64 {
		if hi <= lo {
			return 0
		}
		return float64(tenth-1) / ((hi - lo) / 1000)
	}
	return rate(at[0], at[tenth-1]), rate(at[len(at)-tenth], at[len(at)-1])
}

// touch writes every page of the tally's arrays, so that they are
// resident before the first snapshot. It runs before any measured event
// is published.
func (t *tally) touch() {
	const step = 512 // elements of at most 8 bytes: every 4 KB page
	for i := 0; i < len(t.pubAt); i += step {
		t.pubAt[i].Store(0)
	}
	for i := 0; i < len(t.calls); i += step {
		t.calls[i] = 0
	}
	for g := range t.counts {
		for i := 0; i < len(t.counts[g]); i += step {
			t.counts[g][i].Store(0)
			t.lat[g][i] = 0
		}
	}
}

// topicOf is the topic of event i: with -topics N, bench.events.<i mod N>.
func topicOf(o *Options, i int) string {
	if o.Topics <= 1 {
		return benchTopic
	}
	return benchTopic + "." + strconv.Itoa(i%o.Topics)
}

// topicNames is every topic of the run, in order.
func topicNames(o *Options) []string {
	if o.Topics <= 1 {
		return []string{benchTopic}
	}
	names := make([]string, o.Topics)
	for k := range names {
		names[k] = topicOf(o, k)
	}
	return names
}
