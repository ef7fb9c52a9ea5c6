package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/promethean/promlib/event"
)

// Report is the JSON line of a run. README.md says what each field means.
type Report struct {
	Store       string  `json:"store"`
	Seed        int64   `json:"seed"`
	FaultS      float64 `json:"fault_s"`
	Publishers  int     `json:"publishers"`
	Consumers   int     `json:"consumers"`
	Partitions  int     `json:"partitions"`
	LeaseMS     int64   `json:"lease_ms"`
	MaxInFlight int     `json:"max_in_flight"`

	Faults   map[string]int `json:"faults"`
	NoTarget int            `json:"faults_without_target"`
	Skipped  []string       `json:"skipped,omitempty"`
	Restarts int            `json:"restarts"`
	Crashes  int            `json:"crashes"`

	PublishedAcked int `json:"published_acked"`
	Maybe          int `json:"maybe"`
	MaybeStored    int `json:"maybe_stored"`
	PublishErrors  int `json:"publish_errors"`
	Stored         int `json:"stored"`
	StoredTwice    int `json:"stored_twice"`
	SeqHoles       int `json:"seq_holes"`

	Delivered      int `json:"delivered"`
	Deliveries     int `json:"deliveries"`
	Lost           int `json:"lost"`
	NeverDelivered int `json:"never_delivered"`
	Unexpected     int `json:"unexpected"`
	Unacked        int `json:"unacked"`
	DeadLettered   int `json:"dead_lettered"`

	Duplicates      int            `json:"duplicates"`
	DuplicateIDs    int            `json:"duplicate_ids"`
	DuplicateCauses map[string]int `json:"duplicate_causes"`
	OrderViolations int            `json:"order_violations"`
	RefusedSettles  int            `json:"refused_settles"`

	Drained bool  `json:"drained"`
	DrainMS int64 `json:"drain_ms"`

	OK       bool     `json:"ok"`
	Failures []string `json:"failures,omitempty"`
	// Examples name up to five ids of each non-zero count that fails a
	// run, and of order violations and unexplained duplicates.
	Examples map[string][]string `json:"examples,omitempty"`
}

func (r *Report) fail(format string, args ...any) {
	r.OK = false
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

func (r *Report) example(kind, id string) {
	if r.Examples == nil {
		r.Examples = make(map[string][]string)
	}
	if len(r.Examples[kind]) < 5 {
		r.Examples[kind] = append(r.Examples[kind], id)
	}
}

func (r *Report) writeJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Causes of a duplicate delivery (see README.md).
const (
	causeNack        = "nack"
	causeLeaseLost   = "lease_lost"
	causeCrash       = "crash"
	causeStalled     = "stalled_member"
	causeAfterCommit = "after_commit"
	causeUnexplained = "unexplained"
)

// analysisInput is what a run collected.
type analysisInput struct {
	Options  *Options
	Lines    []procLine
	Faults   []*Fault
	Procs    []*proc
	Records  []event.Record
	DLQ      map[string]int // dead-lettered ids of the group, with their count
	Crashes  []string
	Restarts int
	Fatal    error
}

// delivery is one deliver line, with the settle line that answered it.
type delivery struct {
	proc   *proc
	line   Line
	start  int64 // when the handler began, Unix ns (see Line.DL)
	settle *Line
	index  int // in the input's lines
}

// hold is an OnAssign (on) or OnRevoke of a partition.
type hold struct {
	t  int64
	on bool
}

// analysis holds the indexes analyse builds.
type analysis struct {
	in          analysisInput
	byID        map[string][]*delivery
	commits     map[int][]Line            // by partition, in time order
	revokes     map[*proc]map[int][]int64 // revoke times by partition
	holds       map[*proc]map[int][]hold  // assigns and revokes by partition, in order
	procFaults  map[*proc][]*Fault
	serverFault []*Fault
	ended       map[*proc]bool   // killed by a fault, or crashed
	born        map[string]int64 // when each id's publisher first tried it
}

// analyse counts what a run's lines, faults and records show.
func analyse(in analysisInput) *Report {
	o := in.Options
	rep := &Report{
		Store: o.Store, Seed: o.Seed, Publishers: o.Publishers, Consumers: o.Consumers,
		Partitions: o.Partitions, LeaseMS: o.Lease.Milliseconds(), MaxInFlight: o.MaxInFlight,
		Faults: make(map[string]int), DuplicateCauses: make(map[string]int),
		Restarts: in.Restarts, Crashes: len(in.Crashes), OK: true,
	}
	if in.Fatal != nil {
		rep.fail("%v", in.Fatal)
	}
	for _, c := range in.Crashes {
		rep.example("crash", c)
	}
	a := &analysis{
		in: in, byID: make(map[string][]*delivery), commits: make(map[int][]Line),
		revokes: make(map[*proc]map[int][]int64), holds: make(map[*proc]map[int][]hold), procFaults: make(map[*proc][]*Fault), ended: make(map[*proc]bool),
		born: make(map[string]int64),
	}
	for _, f := range in.Faults {
		rep.Faults[f.Kind]++
		if f.proc == nil {
			a.serverFault = append(a.serverFault, f)
		} else {
			a.procFaults[f.proc] = append(a.procFaults[f.proc], f)
			if f.Kind == faultKill {
				a.ended[f.proc] = true
			}
		}
	}
	for _, p := range in.Procs {
		if !p.killed && !p.stopping {
			a.ended[p] = true // crashed (or still running: no run ends so)
		}
	}

	// Publishes.
	tried := make(map[string]bool)
	acked := make(map[string]bool)
	// Deliveries, and the settle lines that answer them.
	type attemptKey struct {
		proc *proc
		id   string
		a    int
	}
	open := make(map[attemptKey]*delivery)
	for i, pl := range in.Lines {
		l := pl.Line
		switch l.K {
		case "try":
			tried[l.ID] = true
			if _, ok := a.born[l.ID]; !ok {
				a.born[l.ID] = l.T
			}
		case "ack":
			tried[l.ID], acked[l.ID] = true, true
		case "perr":
			rep.PublishErrors++
		case "deliver":
			d := &delivery{proc: pl.proc, line: l, start: l.T, index: i}
			if l.DL != 0 {
				d.start = min(l.T, l.DL-o.AckTimeout.Nanoseconds())
			}
			a.byID[l.ID] = append(a.byID[l.ID], d)
			open[attemptKey{pl.proc, l.ID, l.A}] = d
		case "settle":
			k := attemptKey{pl.proc, l.ID, l.A}
			if d := open[k]; d != nil {
				d.settle = &in.Lines[i].Line
				delete(open, k)
			}
			if l.R != "ok" {
				rep.RefusedSettles++
			}
		case "commit":
			a.commits[l.P] = append(a.commits[l.P], l)
		case "assign", "revoke":
			if l.K == "revoke" {
				m := a.revokes[pl.proc]
				if m == nil {
					m = make(map[int][]int64)
					a.revokes[pl.proc] = m
				}
				m[l.P] = append(m[l.P], l.T)
			}
			m := a.holds[pl.proc]
			if m == nil {
				m = make(map[int][]hold)
				a.holds[pl.proc] = m
			}
			m[l.P] = append(m[l.P], hold{l.T, l.K == "assign"})
		}
	}
	for _, cs := range a.commits {
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].T < cs[j].T })
	}
	rep.PublishedAcked = len(acked)

	// The store.
	stored := make(map[string][]uint64)
	var last uint64
	for _, r := range in.Records {
		stored[r.ID] = append(stored[r.ID], r.Seq)
		if r.Seq > last+1 {
			rep.SeqHoles += int(r.Seq - last - 1)
		}
		last = r.Seq
	}
	rep.Stored = len(in.Records)
	for id, seqs := range stored {
		if len(seqs) > 1 {
			rep.StoredTwice++
			rep.example("stored_twice", id)
		}
	}
	for id := range tried {
		if !acked[id] {
			rep.Maybe++
			if len(stored[id]) > 0 {
				rep.MaybeStored++
			}
		}
	}
	for _, n := range in.DLQ {
		rep.DeadLettered += n
	}

	// Deliveries against publishes and the store.
	unexpected := make(map[string]bool)
	for id, ds := range a.byID {
		rep.Deliveries += len(ds)
		if !tried[id] {
			unexpected[id] = true
		}
		for _, d := range ds {
			if !slices.Contains(stored[id], d.line.Seq) {
				unexpected[id] = true // delivered at a seq the store does not hold it at
			}
		}
	}
	for id := range stored {
		if !tried[id] {
			unexpected[id] = true
		}
	}
	rep.Unexpected = len(unexpected)
	for _, id := range sortedKeys(unexpected) {
		rep.example("unexpected", id)
	}
	rep.Delivered = len(a.byID)
	for _, id := range sortedKeys(acked) {
		if len(a.byID[id]) == 0 {
			rep.Lost++
			rep.example("lost", id)
		}
	}
	for _, id := range sortedKeys(stored) {
		if len(a.byID[id]) == 0 {
			rep.NeverDelivered++
			rep.example("never_delivered", id)
		}
	}

	// Settled: every stored record was acked by a consumer, or
	// dead-lettered, unless its ack's outcome died with a killed child.
	for _, id := range sortedKeys(stored) {
		ds := a.byID[id]
		if len(ds) == 0 || in.DLQ[id] > 0 {
			continue
		}
		ok, unknown := false, false
		for _, d := range ds {
			if d.settle != nil && d.settle.Op == "ack" && d.settle.R == "ok" {
				ok = true
			}
			if d.settle == nil && a.ended[d.proc] {
				unknown = true
			}
		}
		if !ok && !unknown {
			rep.Unacked++
			rep.example("unacked", id)
		}
	}

	// Duplicates, by cause.
	for _, id := range sortedKeys(a.byID) {
		ds := a.byID[id]
		if len(ds) < 2 {
			continue
		}
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].start < ds[j].start })
		rep.DuplicateIDs++
		for k := 1; k < len(ds); k++ {
			rep.Duplicates++
			c := a.cause(ds[k-1], ds[k])
			rep.DuplicateCauses[c]++
			if c == causeAfterCommit || c == causeUnexplained || c == causeStalled {
				rep.example(c, fmt.Sprintf("%s seq %d p%d: %s a%d then %s a%d", id, ds[k].line.Seq, ds[k].line.P,
					ds[k-1].proc.member, ds[k-1].line.A, ds[k].proc.member, ds[k].line.A))
			}
		}
	}

	rep.OrderViolations = a.orderViolations(rep)

	if rep.Lost > 0 {
		rep.fail("lost %d acknowledged publishes", rep.Lost)
	}
	if rep.NeverDelivered > rep.Lost {
		rep.fail("%d stored records never delivered", rep.NeverDelivered)
	}
	if rep.Unexpected > 0 {
		rep.fail("%d unexpected ids", rep.Unexpected)
	}
	if rep.StoredTwice > 0 {
		rep.fail("%d ids stored twice", rep.StoredTwice)
	}
	if rep.Unacked > 0 {
		rep.fail("%d records settled without an ack", rep.Unacked)
	}
	return rep
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// committedBefore returns the highest cursor of partition p committed
// (reported) before t.
func (a *analysis) committedBefore(p int, t int64) uint64 {
	var c uint64
	for _, l := range a.commits[p] {
		if l.T >= t {
			break
		}
		c = max(c, l.Seq)
	}
	return c
}

// cause says why cur delivered again what prev delivered: the first that
// applies of
//
//   - stalled_member: cur's process (not prev's) was stalled (SIGSTOP)
//     while it held the partition, after the record was published, and
//     cur began within a lease after SIGCONT, before the process gave the
//     partition up: a delivery it had taken before the stall and handled
//     after it, its partition lease gone;
//   - after_commit: a consumer had committed the partition's cursor at or
//     past the record before cur began (the group had settled it);
//   - nack: prev was nacked;
//   - a fault (kill, stop, pg_terminate, pg_restart) that hit prev's
//     process, or the server, between prev's start and cur's;
//   - crash: prev's process exited by itself before cur;
//   - lease_lost: prev's ack was refused, or its process gave the
//     partition up after prev (before cur, or after it: a member that
//     lost its lease may notice late);
//   - unexplained: none of these.
func (a *analysis) cause(prev, cur *delivery) string {
	if cur.proc != prev.proc && a.stalledMember(cur) {
		return causeStalled
	}
	if a.committedBefore(cur.line.P, cur.start) >= cur.line.Seq {
		return causeAfterCommit
	}
	if s := prev.settle; s != nil && s.Op == "nack" && s.R == "ok" {
		return causeNack
	}
	var first *Fault
	for _, f := range append(slices.Clone(a.procFaults[prev.proc]), a.serverFault...) {
		until := f.Until
		if until == 0 {
			until = cur.start // a stop or restart still on
		}
		if until >= prev.start && f.T <= cur.start && (first == nil || f.T < first.T) {
			first = f
		}
	}
	if first != nil {
		return first.Kind
	}
	if a.ended[prev.proc] && prev.settle == nil {
		return causeCrash
	}
	if prev.settle == nil || prev.settle.R != "ok" {
		return causeLeaseLost
	}
	// A revoke after prev, also one after cur: the member that acked
	// prev lost the partition before its commit passed the record (a
	// commit that passed it makes cur after_commit), and may notice only
	// after the next member delivered it again.
	for _, t := range a.revokes[prev.proc][prev.line.P] {
		if t >= prev.start {
			return causeLeaseLost
		}
	}
	return causeUnexplained
}

// stalledMember reports whether d began right after a stall of its
// process that began after the record was published while the process
// held the partition, with no OnRevoke of it since (see cause).
func (a *analysis) stalledMember(d *delivery) bool {
	born, ok := a.born[d.line.ID]
	if !ok {
		return false
	}
	lease := a.in.Options.Lease.Nanoseconds()
	for _, f := range a.procFaults[d.proc] {
		if f.Kind != faultStop || f.Until == 0 || f.T < born || f.Until > d.start || d.start > f.Until+lease ||
			!a.held(d.proc, d.line.P, f.T) {
			continue
		}
		revoked := false
		for _, t := range a.revokes[d.proc][d.line.P] {
			if t >= f.Until && t <= d.start {
				revoked = true
			}
		}
		if !revoked {
			return true
		}
	}
	return false
}

// held reports whether p held partition part at t: its last OnAssign or
// OnRevoke of it before t was an OnAssign.
func (a *analysis) held(p *proc, part int, t int64) bool {
	on := false
	for _, h := range a.holds[p][part] {
		if h.t >= t {
			break
		}
		on = h.on
	}
	return on
}

// orderViolations counts, in each consumer incarnation and partition, the
// first deliveries of records (attempt 1, never delivered before) that
// come after the first delivery of a higher seq in the same assignment:
// between the same OnAssign and OnRevoke, with no stall (SIGSTOP) of the
// process in between. A redelivery (attempt above 1, or a record some
// consumer had already got) has a reason to come late and is left out.
func (a *analysis) orderViolations(rep *Report) int {
	type key struct {
		proc *proc
		p    int
	}
	seen := make(map[string]bool) // ids delivered before
	epoch := make(map[key]int)
	high := make(map[key]uint64) // highest seq first delivered in the epoch
	highEpoch := make(map[key]int)
	n := 0
	for _, pl := range a.in.Lines {
		l := pl.Line
		k := key{pl.proc, l.P}
		switch l.K {
		case "assign", "revoke":
			epoch[k]++
		case "deliver":
			first := l.A == 1 && !seen[l.ID]
			seen[l.ID] = true
			if !first {
				continue
			}
			start := l.T
			if l.DL != 0 {
				start = min(start, l.DL-a.in.Options.AckTimeout.Nanoseconds())
			}
			e := epoch[k]
			for _, f := range a.procFaults[pl.proc] {
				if f.Kind == faultStop && f.T < start {
					e += 1 << 20 // a stall before this delivery starts a new epoch
				}
			}
			if highEpoch[k] != e {
				highEpoch[k], high[k] = e, 0
			}
			if l.Seq < high[k] {
				n++
				rep.example("order", fmt.Sprintf("%s p%d: seq %d after %d", pl.proc.member, l.P, l.Seq, high[k]))
				continue
			}
			high[k] = l.Seq
		}
	}
	return n
}

// explain writes what a run shows of each record that rep's examples of
// kinds name: where it was stored, what its publisher and the consumers
// reported of it, who first committed its partition past it, and the
// faults around it.
func explain(w io.Writer, in analysisInput, rep *Report, kinds ...string) {
	seqOf := make(map[string][]uint64)
	partOf := make(map[string]int)
	for _, r := range in.Records {
		seqOf[r.ID] = append(seqOf[r.ID], r.Seq)
		partOf[r.ID] = r.Partition
	}
	byID := make(map[string][]procLine)
	for _, pl := range in.Lines {
		if pl.ID != "" {
			byID[pl.ID] = append(byID[pl.ID], pl)
		}
	}
	t0 := int64(0)
	if len(in.Procs) > 0 {
		t0 = in.Procs[0].start
	}
	at := func(t int64) string { return fmt.Sprintf("%8.3fs", float64(t-t0)/1e9) }
	for _, kind := range kinds {
		for _, ex := range rep.Examples[kind] {
			id, _, _ := strings.Cut(ex, " ")
			fmt.Fprintf(w, "  %s %s: stored at seqs %v, partition %d\n", kind, ex, seqOf[id], partOf[id])
			var from, to int64
			for _, pl := range byID[id] {
				fmt.Fprintf(w, "    %s %-6s %-8s seq %d attempt %d %s %s\n", at(pl.T), pl.proc.member, pl.K, pl.Seq, pl.A, pl.Op, pl.R)
				if from == 0 {
					from = pl.T
				}
				to = max(to, pl.T)
			}
			if seqs := seqOf[id]; len(seqs) > 0 {
				p := partOf[id]
				for _, pl := range in.Lines {
					if pl.K == "commit" && pl.P == p && pl.Seq >= seqs[0] {
						fmt.Fprintf(w, "    %s %-6s first committed partition %d past it, at %d\n", at(pl.T), pl.proc.member, p, pl.Seq)
						to = max(to, pl.T)
						break
					}
				}
				for _, pl := range in.Lines {
					if (pl.K == "assign" || pl.K == "revoke") && pl.P == p && pl.T >= from-in.Options.Lease.Nanoseconds() && pl.T <= to {
						fmt.Fprintf(w, "    %s %-6s %s partition %d\n", at(pl.T), pl.proc.member, pl.K, p)
					}
				}
			}
			if from == 0 {
				continue
			}
			lease := in.Options.Lease.Nanoseconds()
			for _, f := range in.Faults {
				if f.T >= from-2*lease && f.T <= to+lease {
					fmt.Fprintf(w, "    %s fault %s %s (for %v)\n", at(f.T), f.Kind, f.Target, time.Duration(max(f.Until-f.T, 0)).Round(time.Millisecond))
				}
			}
		}
	}
}
