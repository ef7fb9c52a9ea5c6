package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/promethean/promlib/event"
)

// phase is where a run is; it only moves forward.
type phase int

const (
	phaseStart          phase = iota // starting the children
	phaseFaults                      // injecting faults
	phaseSettle                      // faults stopped: stalled children resumed, killed ones restarted
	phaseStopPublishers              // publishers told to stop; the group drains
	phaseStopConsumers               // consumers told to stop
	phaseDone
)

// slot is one child of the run (p0, c1, ...) over its incarnations.
type slot struct {
	name, role string
	cur        *proc // the current incarnation
	inc        int
	up         bool // cur is running and not stopped
	maxTried   int  // a publisher's highest number tried, -1 before the first
}

// proc is one incarnation of a child process.
type proc struct {
	slot   *slot
	inc    int
	member string // name.inc
	pid    int
	start  int64 // Unix ns
	exited chan struct{}
	ready  chan struct{}
	err    error // of Wait, once exited is closed
	// guarded by harness.mu
	killed   bool // by a fault
	stopping bool // told to stop (SIGTERM)
	readyOK  bool
	stderr   string // the file of its standard error
}

// Fault is one fault the harness injected.
type Fault struct {
	Kind string `json:"kind"`
	// Target is the incarnation it hit ("c1.3"), "" for the server.
	Target string `json:"target,omitempty"`
	proc   *proc
	// T and Until bound it, Unix ns: a stop lasts from SIGSTOP to SIGCONT,
	// a server restart from pg_ctl's start to its end; a kill and a
	// terminate are instants (Until is T).
	T     int64 `json:"t"`
	Until int64 `json:"until"`
	// N is the connections a terminate ended.
	N int64 `json:"n,omitempty"`
}

// procLine is a Line and the incarnation that sent it.
type procLine struct {
	proc *proc
	Line
}

// harness runs one fault run.
type harness struct {
	o      *Options
	log    io.Writer
	dir    string
	exe    string
	runID  string
	db     string // the SQLite file, or the PostgreSQL URL without application_name
	schema string
	pg     *cluster // the cluster the harness started, nil for PG_URL
	admin  string   // PostgreSQL URL of the harness's own connections
	store  event.Store
	kinds  []string
	rng    *rand.Rand
	t0     time.Time

	mu       sync.Mutex
	cond     *sync.Cond // broadcast when pending falls
	pending  int        // restarts and resumes under way
	phase    phase
	slots    []*slot
	procs    []*proc
	lines    []procLine
	faults   []*Fault
	crashes  []string
	fatal    error
	restarts int
	noTarget int
}

var runSeq atomic.Int64

// Run runs one fault run with o (validated) and returns its report,
// logging faults (with -v) and the analysis of any failure to log. An
// error means the run could not be made or was interrupted; the report is
// then nil.
func Run(ctx context.Context, o *Options, log io.Writer) (rep *Report, err error) {
	h := &harness{o: o, log: log, t0: time.Now(), rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x6661756c7473))}
	h.cond = sync.NewCond(&h.mu)
	h.runID = fmt.Sprintf("faults_%d_%d", os.Getpid(), runSeq.Add(1))
	if h.exe, err = os.Executable(); err != nil {
		return nil, err
	}
	kinds, err := o.faultKinds()
	if err != nil {
		return nil, err
	}
	var skipped []string
	h.dir = o.Dir
	if h.dir == "" {
		if h.dir, err = os.MkdirTemp("", "faults-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return nil, err
	}
	keep := o.Keep || o.Dir != ""
	defer func() {
		if rep == nil || !rep.OK {
			keep = true
		}
		if !keep {
			_ = os.RemoveAll(h.dir)
		} else {
			fmt.Fprintf(log, "faults: the run's files are in %s\n", h.dir)
		}
	}()

	switch o.Store {
	case "sqlite":
		h.db = filepath.Join(h.dir, "faults.db")
		for _, k := range kinds {
			if k == faultPGTerm || k == faultPGRestart {
				skipped = append(skipped, k+": not a fault of SQLite")
			}
		}
		kinds = without(kinds, faultPGTerm, faultPGRestart)
	case "postgres":
		h.db = os.Getenv("PG_URL")
		if h.db == "" {
			h.logf("starting a PostgreSQL cluster")
			if h.pg, err = startCluster(ctx); err != nil {
				return nil, fmt.Errorf("start PostgreSQL: %w", err)
			}
			defer h.pg.stop()
			h.db = h.pg.url
		} else if contains(kinds, faultPGRestart) {
			skipped = append(skipped, faultPGRestart+": PG_URL is set, so the harness did not start the server and does not restart it")
			kinds = without(kinds, faultPGRestart)
		}
		h.schema = h.runID
		if h.admin, err = withAppName(h.db, h.runID+"-harness"); err != nil {
			return nil, err
		}
	}
	h.kinds = kinds
	for _, s := range skipped {
		fmt.Fprintf(log, "faults: skipped fault %s\n", s)
	}

	octx, cancel := context.WithTimeout(ctx, time.Minute)
	s, closeS, err := openStore(octx, o.Store, h.dbFor(h.runID+"-harness"), h.schema)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	h.store = s
	closeStore := sync.OnceFunc(closeS)
	defer closeStore()
	defer h.killAll()

	rep, err = h.run(ctx)
	if err != nil {
		return nil, err
	}
	rep.Skipped = skipped
	if h.pg == nil && o.Store == "postgres" && rep.OK && !o.Keep {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		closeStore()
		if err := dropSchema(dctx, h.admin, h.schema); err != nil {
			fmt.Fprintf(log, "faults: drop schema %s: %v\n", h.schema, err)
		}
	} else if o.Store == "postgres" && h.pg == nil {
		fmt.Fprintf(log, "faults: the run's records are in schema %s\n", h.schema)
	}
	return rep, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func without(xs []string, drop ...string) []string {
	var out []string
	for _, x := range xs {
		if !contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

// dbFor returns the run's database as the incarnation or tool named app
// opens it.
func (h *harness) dbFor(app string) string {
	if h.o.Store != "postgres" {
		return h.db
	}
	u, err := withAppName(h.db, app)
	if err != nil {
		return h.db // checked in Run
	}
	return u
}

func (h *harness) logf(format string, args ...any) {
	if h.o.Verbose {
		fmt.Fprintf(h.log, "faults %6.2fs: %s\n", time.Since(h.t0).Seconds(), fmt.Sprintf(format, args...))
	}
}

func (h *harness) setFatal(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fatal == nil {
		h.fatal = err
	}
}

func (h *harness) setPhase(p phase) {
	h.mu.Lock()
	h.phase = p
	h.mu.Unlock()
}

// run starts the children, injects faults, drains and reports.
func (h *harness) run(ctx context.Context) (*Report, error) {
	o := h.o
	for i := range o.Consumers {
		h.slots = append(h.slots, &slot{name: "c" + strconv.Itoa(i), role: "consumer", maxTried: -1})
	}
	for i := range o.Publishers {
		h.slots = append(h.slots, &slot{name: "p" + strconv.Itoa(i), role: "publisher", maxTried: -1})
	}
	// Consumers first: the group exists before the first record.
	for _, role := range []string{"consumer", "publisher"} {
		var ps []*proc
		for _, sl := range h.slots {
			if sl.role == role {
				p, err := h.start(sl, 0)
				if err != nil {
					return nil, err
				}
				ps = append(ps, p)
			}
		}
		for _, p := range ps {
			if err := h.waitReady(ctx, p, time.Minute); err != nil {
				return nil, err
			}
		}
	}
	h.logf("children ready; faults for %v", o.Duration)
	h.setPhase(phaseFaults)
	faultStart := time.Now()
	if err := h.injectFaults(ctx); err != nil {
		return nil, err
	}
	faultEnd := time.Now()

	// Settle: no new faults; stalled children resume, killed ones restart.
	h.setPhase(phaseSettle)
	h.waitPending()
	// Every child ready: a child that has not set up its signals yet dies
	// of the SIGTERM that stops it.
	for _, sl := range h.slots {
		h.mu.Lock()
		p := sl.cur
		h.mu.Unlock()
		if err := h.waitReady(ctx, p, time.Minute); err != nil {
			return nil, err
		}
	}
	h.logf("faults over; stopping the publishers")
	h.setPhase(phaseStopPublishers)
	h.waitPending()
	h.stopRole("publisher")

	drainStart := time.Now()
	drained, state, err := h.drain(ctx)
	if err != nil {
		return nil, err
	}
	drainTime := time.Since(drainStart)
	h.logf("drained: %v; stopping the consumers", drained)
	h.setPhase(phaseStopConsumers)
	h.waitPending()
	h.stopRole("consumer")
	h.setPhase(phaseDone)

	recs, dlq, err := h.readBack(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	in := analysisInput{
		Options:  o,
		Lines:    h.lines,
		Faults:   h.faults,
		Procs:    h.procs,
		Records:  recs,
		DLQ:      dlq,
		Crashes:  h.crashes,
		Restarts: h.restarts,
		Fatal:    h.fatal,
	}
	h.mu.Unlock()
	rep := analyse(in)
	h.saveFaults()
	rep.FaultS = faultEnd.Sub(faultStart).Seconds()
	rep.Drained = drained
	rep.DrainMS = drainTime.Milliseconds()
	if !drained {
		rep.fail("not drained after %v: %s", o.Drain, state)
	}
	rep.NoTarget = h.noTarget
	if !rep.OK {
		fmt.Fprintf(h.log, "faults: run failed (store %s, seed %d): %v\n", rep.Store, rep.Seed, rep.Failures)
		explain(h.log, in, rep, "lost", "never_delivered", "unacked", "stored_twice", "unexpected")
	}
	if o.Verbose {
		explain(h.log, in, rep, causeStalled, causeAfterCommit, causeUnexplained, "order")
	}
	return rep, nil
}

// saveFaults writes the faults injected to faults.jsonl in the run's
// directory, one JSON object a line, for a look at a run afterwards.
func (h *harness) saveFaults() {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b []byte
	for _, f := range h.faults {
		j, _ := json.Marshal(f)
		b = append(append(b, j...), '\n')
	}
	if err := os.WriteFile(filepath.Join(h.dir, "faults.jsonl"), b, 0o644); err != nil {
		fmt.Fprintf(h.log, "faults: %v\n", err)
	}
}

// childArgs are the command line of incarnation inc of sl.
func (h *harness) childArgs(sl *slot, inc, from int) []string {
	o := h.o
	return []string{
		"-role", sl.role, "-name", sl.name, "-inc", strconv.Itoa(inc), "-from", strconv.Itoa(from),
		"-store", o.Store, "-db", h.dbFor(h.appName(sl.name, inc)), "-schema", h.schema,
		"-partitions", strconv.Itoa(o.Partitions), "-lease", o.Lease.String(), "-ack-timeout", o.AckTimeout.String(),
		"-max-inflight", strconv.Itoa(o.MaxInFlight), "-max-attempts", strconv.Itoa(o.MaxAttempts),
		"-nack", strconv.FormatFloat(o.Nack, 'g', -1, 64), "-rate", strconv.FormatFloat(o.Rate, 'g', -1, 64),
		"-seed", strconv.FormatInt(o.Seed, 10),
	}
}

// appName is the application_name of an incarnation's connections.
func (h *harness) appName(name string, inc int) string {
	return h.runID + "-" + name + "." + strconv.Itoa(inc)
}

// start starts the next incarnation of sl; a publisher starts at number
// from.
func (h *harness) start(sl *slot, from int) (*proc, error) {
	h.mu.Lock()
	sl.inc++
	inc := sl.inc
	h.mu.Unlock()
	member := sl.name + "." + strconv.Itoa(inc)
	cmd := exec.Command(h.exe, h.childArgs(sl, inc, from)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	// Its own process group, so that a Ctrl-C reaches the harness only;
	// and killed with the harness.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	errPath := filepath.Join(h.dir, member+".stderr")
	errFile, err := os.Create(errPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = errFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = errFile.Close()
		return nil, err
	}
	linesFile, err := os.Create(filepath.Join(h.dir, member+".lines"))
	if err != nil {
		_ = errFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		_ = errFile.Close()
		_ = linesFile.Close()
		return nil, fmt.Errorf("start %s: %w", member, err)
	}
	_ = errFile.Close() // the child has it
	p := &proc{slot: sl, inc: inc, member: member, pid: cmd.Process.Pid, start: time.Now().UnixNano(),
		exited: make(chan struct{}), ready: make(chan struct{}), stderr: errPath}
	h.mu.Lock()
	sl.cur, sl.up = p, true
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	h.logf("started %s (pid %d, from %d)", member, p.pid, from)
	go h.read(p, cmd, stdout, linesFile)
	return p, nil
}

// read takes p's lines until it exits, then waits for it.
func (h *harness) read(p *proc, cmd *exec.Cmd, stdout io.Reader, raw *os.File) {
	w := bufio.NewWriter(raw)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		b := sc.Bytes()
		_, _ = w.Write(b)
		_ = w.WriteByte('\n')
		var l Line
		if err := json.Unmarshal(b, &l); err != nil {
			continue // not a report (a killed child writes whole lines)
		}
		h.mu.Lock()
		h.lines = append(h.lines, procLine{proc: p, Line: l})
		switch l.K {
		case "try":
			p.slot.maxTried = max(p.slot.maxTried, l.N)
		case "ready":
			if !p.readyOK {
				p.readyOK = true
				close(p.ready)
			}
		}
		h.mu.Unlock()
	}
	_ = w.Flush()
	_ = raw.Close()
	p.err = cmd.Wait()
	close(p.exited)
	h.exited(p)
}

// exited handles the end of p: one the harness did not end is a crash,
// restarted while the run still needs it.
func (h *harness) exited(p *proc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.killed || p.stopping {
		return
	}
	msg := fmt.Sprintf("%s exited by itself (%v): %s", p.member, p.err, lastLines(p.stderr, 5))
	h.crashes = append(h.crashes, msg)
	if p.slot.cur == p {
		p.slot.up = false
	}
	restart := h.phase < phaseStopPublishers || (h.phase < phaseStopConsumers && p.slot.role == "consumer")
	if !restart || h.phase == phaseStart || p.slot.cur != p {
		return
	}
	fmt.Fprintf(h.log, "faults: %s; restarting it\n", msg)
	h.pending++
	go func() {
		defer h.done()
		time.Sleep(200 * time.Millisecond)
		h.restart(p.slot, true)
	}()
}

// restart starts sl again; a publisher starts with the number it tried
// last (republish) or the one after.
func (h *harness) restart(sl *slot, republish bool) {
	h.mu.Lock()
	from := sl.maxTried
	if !republish || from < 0 {
		from++
	}
	h.restarts++
	h.mu.Unlock()
	if _, err := h.start(sl, from); err != nil {
		h.setFatal(err)
	}
}

func (h *harness) done() {
	h.mu.Lock()
	h.pending--
	h.cond.Broadcast()
	h.mu.Unlock()
}

// waitPending waits until no restart or resume is under way.
func (h *harness) waitPending() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.pending > 0 {
		h.cond.Wait()
	}
}

func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(b)
	for i, k := len(s)-1, 0; i >= 0; i-- {
		if s[i] == '\n' && i != len(s)-1 {
			k++
			if k == n {
				return tail(s[i+1:], 2000)
			}
		}
	}
	return tail(s, 2000)
}

// waitReady waits until p reports ready.
func (h *harness) waitReady(ctx context.Context, p *proc, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("%s exited before it was ready (%v): %s", p.member, p.err, lastLines(p.stderr, 10))
	case <-t.C:
		return fmt.Errorf("%s not ready after %v: %s", p.member, d, lastLines(p.stderr, 10))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopRole tells the current incarnations of role to stop (SIGTERM) and
// waits for them; one still running after 45s is killed.
func (h *harness) stopRole(role string) {
	var ps []*proc
	h.mu.Lock()
	for _, sl := range h.slots {
		if sl.role != role || sl.cur == nil {
			continue
		}
		select {
		case <-sl.cur.exited: // crashed, and not restarted this late
		default:
			sl.cur.stopping = true
			ps = append(ps, sl.cur)
		}
	}
	h.mu.Unlock()
	for _, p := range ps {
		_ = syscall.Kill(p.pid, syscall.SIGTERM)
	}
	for _, p := range ps {
		select {
		case <-p.exited:
			if p.err != nil {
				h.mu.Lock()
				h.crashes = append(h.crashes, fmt.Sprintf("%s failed to stop (%v): %s", p.member, p.err, lastLines(p.stderr, 5)))
				h.mu.Unlock()
			}
		case <-time.After(45 * time.Second):
			h.mu.Lock()
			h.crashes = append(h.crashes, fmt.Sprintf("%s still running 45s after SIGTERM: killed", p.member))
			h.mu.Unlock()
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			<-p.exited
		}
	}
}

// killAll kills every child still running.
func (h *harness) killAll() {
	h.mu.Lock()
	ps := append([]*proc(nil), h.procs...)
	for _, p := range ps {
		p.killed = true
	}
	h.mu.Unlock()
	for _, p := range ps {
		select {
		case <-p.exited:
		default:
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			_ = syscall.Kill(p.pid, syscall.SIGCONT)
			<-p.exited
		}
	}
}

// drain waits until the group has settled every record of the topic:
// each partition's committed cursor at the head, nothing in flight. It
// returns whether it did within the drain timeout, and the group's last
// state.
func (h *harness) drain(ctx context.Context) (bool, string, error) {
	deadline := time.Now().Add(h.o.Drain)
	var head uint64
	var state string
	for {
		if err := ctx.Err(); err != nil {
			return false, state, err
		}
		h.mu.Lock()
		fatal := h.fatal
		h.mu.Unlock()
		if fatal != nil {
			return false, state, fatal
		}
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var ok bool
		var err error
		if head == 0 {
			head, err = h.store.Head(qctx, topic)
		}
		if err == nil {
			ok, state, err = h.settled(qctx, head)
		}
		cancel()
		if err != nil {
			state = err.Error()
		}
		if ok {
			return true, state, nil
		}
		if time.Now().After(deadline) {
			return false, state, nil
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// settled reports whether the group settled every record up to head.
func (h *harness) settled(ctx context.Context, head uint64) (bool, string, error) {
	if l, ok := h.store.(event.Lister); ok {
		gs, err := l.ListGroups(ctx, topic)
		if err != nil {
			return false, "", err
		}
		for _, g := range gs {
			if g.Group != group {
				continue
			}
			b, _ := json.Marshal(g)
			if len(g.Partitions) != h.o.Partitions || g.InFlight != 0 {
				return false, string(b), nil
			}
			for _, p := range g.Partitions {
				if p.Cursor < head {
					return false, string(b), nil
				}
			}
			return true, string(b), nil
		}
		return false, "the group is not listed", nil
	}
	cs := h.store.(event.CursorStore)
	cur, err := cs.Cursors(ctx, topic, group)
	if err != nil {
		return false, "", err
	}
	b, _ := json.Marshal(cur)
	if len(cur) != h.o.Partitions {
		return false, string(b), nil
	}
	for _, seq := range cur {
		if seq < head {
			return false, string(b), nil
		}
	}
	return true, string(b), nil
}

// readBack reads every record of the topic, and the ids the group
// dead-lettered.
func (h *harness) readBack(ctx context.Context) ([]event.Record, map[string]int, error) {
	read := func(t string) ([]event.Record, error) {
		var out []event.Record
		var after uint64
		for {
			qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			recs, err := h.store.Read(qctx, t, after, 1000)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("read %s back: %w", t, err)
			}
			if len(recs) == 0 {
				return out, nil
			}
			out = append(out, recs...)
			after = recs[len(recs)-1].Seq
		}
	}
	recs, err := read(topic)
	if err != nil {
		return nil, nil, err
	}
	dl, err := read(event.DeadLetterTopic(topic))
	if err != nil {
		return nil, nil, err
	}
	dlq := make(map[string]int)
	for _, r := range dl {
		if r.Headers[event.HeaderDLQGroup] == group {
			dlq[r.Headers[event.HeaderDLQID]]++
		}
	}
	return recs, dlq, nil
}
