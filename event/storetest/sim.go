package storetest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// The simulation of the group protocol: several members (Buses) share one
// group on one store, driven by a seeded random schedule of publishes,
// joins, leaves, crashes (a Bus dropped without settling anything), stalls
// past the lease (the fake clock moves while a member is stopped), acks,
// nacks, ModAcks, dead-letters, late and repeated acks, and store errors
// injected into one member's cursor, lease and group-state calls. The
// invariants are checked as the schedule runs, and after it drains:
//
//   - lost: every published record is settled (acked or dead-lettered)
//     by some member once the schedule has drained;
//   - a cursor commit never passes a record nobody settled: every record
//     of the partition at or below a committed seq had an ack sent, or is
//     in the dead-letter topic;
//   - one attempt settles once: a Delivery whose settle returned nil
//     refuses every later settle;
//   - an attempt counts only when delivered: no delivery's Attempt exceeds
//     the deliveries of its record so far;
//   - order: with MaxInFlight 1, a member delivers a partition's records
//     in seq order from OnAssign to OnRevoke;
//   - OnRevoke runs before another member's OnAssign of the partition,
//     unless the member holding it crashed, stalled or had its store calls
//     fail (it cannot know it lost the partition before it wakes);
//   - every delivery is of a partition assigned to its member;
//   - after the drain, each partition's cursor covers its records.
//
// A failure prints its seed and the steps of the schedule; -seed N runs
// that schedule again. -schedules N runs more schedules than the suite's
// default (make soak).
var (
	simSeed      = flag.Int64("seed", 0, "storetest: run only the group-protocol simulation schedule of this seed")
	simSchedules = flag.Int("schedules", 0, "storetest: how many group-protocol simulation schedules to run (0: the suite's default)")
)

// simTopic is the simulation's topic; its dead-letter topic is the
// default one.
const simTopic = "sim"

// testSimulation runs the schedules of the simulation, each on a new store.
func testSimulation(t *testing.T, s event.Store, o Options) {
	if _, ok := s.(event.LeaseStore); !ok {
		t.Skip("store does not implement LeaseStore")
	}
	if o.Clocked == nil {
		t.Fatal("storetest: Options.Clocked is needed by a store that implements LeaseStore")
	}
	n := o.Schedules
	if n == 0 {
		n = 100
		if o.Fewer {
			n = 10
		}
	}
	if *simSchedules > 0 {
		n = *simSchedules
	}
	seeds := make([]int64, n)
	base := time.Now().UnixNano() % 1_000_000_000
	for i := range seeds {
		seeds[i] = base + int64(i)
	}
	if *simSeed != 0 {
		seeds = []int64{*simSeed}
	}
	for _, seed := range seeds {
		// A subtest each, so that each schedule's store is closed (its
		// cleanups run) before the next one opens another.
		ok := t.Run("seed="+strconv.FormatInt(seed, 10), func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			runSchedule(t, o.Clocked(t, clk), clk, seed)
		})
		if !ok {
			return // one failing seed is enough to report
		}
	}
}

// simConfig is the shape of one schedule, drawn from its seed.
type simConfig struct {
	partitions  int
	maxInFlight int
	ttl         time.Duration
	steps       int
}

// sim is one schedule being run.
type sim struct {
	t     *testing.T
	seed  int64
	cfg   simConfig
	rng   *rand.Rand
	clk   *clock.Fake
	store event.Store
	pub   *event.Bus
	nth   int // members made so far

	members []*simMember

	mu         sync.Mutex // guards what the members' goroutines touch
	recs       map[string]*simRec
	keys       []string
	mustDLQ    map[string]string // id -> why: a commit passed it with no ack sent
	violations []string
	steps      []string
	closing    sync.WaitGroup // crashed members' Close
}

// simRec is what the simulation knows of one published record.
type simRec struct {
	id         string
	part       int
	seq        uint64 // once published
	deliveries int
	ackSent    bool // an ack or a dead-letter was sent for it
	settled    int  // settles that returned nil
}

type memberState int

const (
	live memberState = iota
	stalled
	crashed
	left
)

func (s memberState) String() string {
	return [...]string{"live", "stalled", "crashed", "left"}[s]
}

// simMember is one member: a Bus of its own on the shared store, whose
// group-protocol calls go through a faultStore.
type simMember struct {
	name  string
	bus   *event.Bus
	fs    *faultStore
	state memberState
	// excused: the member crashed, stalled or had store calls fail, so it
	// may find out late that it lost a partition (see the OnRevoke
	// invariant).
	excused bool

	// Guarded by sim.mu.
	pending  []*simDelivery
	assigned map[int]bool
	lastSeq  map[int]uint64
}

type simDelivery struct {
	d       *event.Delivery
	m       *simMember
	settled bool // a settle of it returned nil
}

// runSchedule runs the schedule of seed on store st; it reports whether
// every invariant held.
func runSchedule(t *testing.T, st event.Store, clk *clock.Fake, seed int64) bool {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	cfg := simConfig{
		partitions:  1 + rng.IntN(4),
		maxInFlight: []int{1, 1, 3}[rng.IntN(3)],
		ttl:         3 * time.Second,
		steps:       30 + rng.IntN(30),
	}
	s := &sim{
		t: t, seed: seed, cfg: cfg, rng: rng, clk: clk, store: st,
		recs: make(map[string]*simRec), mustDLQ: make(map[string]string),
	}
	for i := range 6 {
		s.keys = append(s.keys, "k"+strconv.Itoa(i))
	}
	s.logf("seed %d: %d partitions, MaxInFlight %d, %d steps", seed, cfg.partitions, cfg.maxInFlight, cfg.steps)
	defer s.closeAll()
	var err error
	s.pub, err = event.NewBus(st, s.busConfig("pub", nil))
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	s.join()
	for range cfg.steps {
		s.step()
		if s.failed() {
			break
		}
	}
	if !s.failed() {
		s.drain()
	}
	if s.failed() {
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Errorf("group protocol simulation failed; replay it with -seed %d\nviolations:\n  %s\nschedule:\n  %s",
			seed, strings.Join(s.violations, "\n  "), strings.Join(s.steps, "\n  "))
		return false
	}
	return true
}

func (s *sim) busConfig(name string, fs *faultStore) event.Config {
	c := event.Config{
		Clock: s.clk, MemberID: name, Partitions: s.cfg.partitions, LeaseTTL: s.cfg.ttl,
		PollInterval: 50 * time.Millisecond, CommitInterval: 20 * time.Millisecond, ReadBatch: 8,
	}
	if fs != nil {
		c.Cursors, c.Leases, c.GroupState = fs, fs.leaseStore(), fs
		c.Groups, _ = s.store.(event.GroupStore) // settings are not faulted
	}
	c.Logger = slog.New(simLog{s: s, name: name})
	return c
}

func (s *sim) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, fmt.Sprintf("[%s] ", s.clk.Now().Format("04:05.000"))+fmt.Sprintf(format, args...))
}

// violate records a broken invariant; called with s.mu held.
func (s *sim) violate(format string, args ...any) {
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

func (s *sim) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.violations) > 0
}

func (s *sim) live() []*simMember {
	var out []*simMember
	for _, m := range s.members {
		if m.state == live {
			out = append(out, m)
		}
	}
	return out
}

func (s *sim) inState(st memberState) []*simMember {
	var out []*simMember
	for _, m := range s.members {
		if m.state == st {
			out = append(out, m)
		}
	}
	return out
}

// setState sets m's state, and excuses it (see simMember) if excuse; the
// members' hooks read both.
func (s *sim) setState(m *simMember, st memberState, excuse bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.state = st
	m.excused = m.excused || excuse
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// step runs one random step of the schedule.
func (s *sim) step() {
	switch r := s.rng.IntN(100); {
	case r < 22:
		s.publish(1 + s.rng.IntN(4))
	case r < 42:
		s.settle(outAckStep)
	case r < 48:
		s.settle(outNackStep)
	case r < 52:
		s.settle(outModAckStep)
	case r < 54:
		s.settle(outDeadLetterStep)
	case r < 56:
		s.settleAgain()
	case r < 60:
		s.lateSettle()
	case r < 72:
		s.tick(time.Duration(100+s.rng.IntN(700)) * time.Millisecond)
	case r < 78:
		if len(s.live())+len(s.inState(stalled)) < 4 {
			s.join()
		}
	case r < 81:
		if ms := s.live(); len(ms) > 1 {
			s.leave(pick(s.rng, ms))
		}
	case r < 84:
		if ms := s.live(); len(ms) > 1 {
			s.crash(pick(s.rng, ms))
		}
	case r < 88:
		if ms := s.live(); len(ms) > 1 {
			s.stall(pick(s.rng, ms))
		}
	case r < 93:
		if ms := s.inState(stalled); len(ms) > 0 {
			s.resume(pick(s.rng, ms))
		}
	default:
		if ms := s.live(); len(ms) > 0 {
			m := pick(s.rng, ms)
			pct := int32(0)
			if m.fs.errPct.Load() == 0 {
				pct = int32(20 + s.rng.IntN(40))
				s.setState(m, m.state, true)
			}
			m.fs.forget()
			m.fs.errPct.Store(pct)
			s.logf("%s: store calls fail %d%% of the time", m.name, pct)
		}
	}
}

// publish publishes n records through the publisher, which shares no
// faults with the members.
func (s *sim) publish(n int) {
	ctx := context.Background()
	for range n {
		id := fmt.Sprintf("r%d", len(s.recs)+1)
		key := ""
		if s.rng.IntN(3) > 0 {
			key = pick(s.rng, s.keys)
		}
		s.mu.Lock()
		s.recs[id] = &simRec{id: id, part: event.PartitionOf(key, id, s.cfg.partitions)}
		s.mu.Unlock()
		r, err := s.pub.Publish(ctx, simTopic, []byte(`{}`), event.WithID(id), event.WithKey(key))
		if err != nil {
			s.t.Fatalf("seed %d: publish: %v", s.seed, err)
		}
		s.mu.Lock()
		s.recs[id].seq = r.Seq
		s.mu.Unlock()
		s.logf("publish %s key %q: seq %d partition %d", id, key, r.Seq, r.Partition)
	}
}

// join adds a member and subscribes it.
func (s *sim) join() {
	s.nth++
	m := &simMember{name: "m" + strconv.Itoa(s.nth), assigned: map[int]bool{}, lastSeq: map[int]uint64{}}
	m.fs = newFaultStore(s, m)
	b, err := event.NewBus(s.store, s.busConfig(m.name, m.fs))
	if err != nil {
		s.t.Fatalf("seed %d: %v", s.seed, err)
	}
	m.bus = b
	s.mu.Lock() // the members' hooks read s.members
	s.members = append(s.members, m)
	s.mu.Unlock()
	_, err = b.Subscribe(context.Background(), simTopic, "g", m.handler(s),
		event.FromEarliest(), event.WithManualAck(), event.WithMaxInFlight(s.cfg.maxInFlight),
		event.WithAckTimeout(s.cfg.ttl), event.WithMaxAttempts(5), event.WithBackoff(100*time.Millisecond, time.Second),
		event.WithRebalanceHooks(func(_ context.Context, p int) { s.assigned(m, p) }, func(_ context.Context, p int) { s.revoked(m, p) }))
	if err != nil {
		s.t.Fatalf("seed %d: subscribe %s: %v", s.seed, m.name, err)
	}
	s.logf("%s joins", m.name)
	s.settleTime()
}

func (m *simMember) handler(s *sim) event.Handler {
	return func(_ context.Context, d *event.Delivery) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		r := s.recs[d.ID]
		if r == nil {
			s.violate("%s: delivery of %s, never published", m.name, d.ID)
			return nil
		}
		r.deliveries++
		if d.Attempt > r.deliveries {
			s.violate("%s: %s delivered as attempt %d, but only %d deliveries of it reached a handler", m.name, d.ID, d.Attempt, r.deliveries)
		}
		if !m.assigned[d.Partition] && !m.excused {
			// An excused member may hand a handler a delivery it was
			// taking as it found it lost the partition (an ack of it is
			// refused); another may not.
			s.violate("%s: %s (seq %d) delivered from partition %d, not assigned to it", m.name, d.ID, d.Seq, d.Partition)
		}
		if s.cfg.maxInFlight == 1 {
			if last := m.lastSeq[d.Partition]; d.Seq < last {
				s.violate("%s: partition %d delivered seq %d after seq %d", m.name, d.Partition, d.Seq, last)
			}
			m.lastSeq[d.Partition] = d.Seq
		}
		m.pending = append(m.pending, &simDelivery{d: d, m: m})
		return nil
	}
}

func (s *sim) assigned(m *simMember, p int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.members {
		// An excused member's OnAssign may come after it lost the lease
		// again (its store calls failed while it loaded the partition); it
		// is the other member's that must not overlap.
		if o != m && o.assigned[p] && !o.excused && !m.excused {
			s.violate("partition %d assigned to %s while %s (%s) holds it: no OnRevoke before", p, m.name, o.name, o.state)
		}
	}
	m.assigned[p] = true
	m.lastSeq[p] = 0
	s.steps = append(s.steps, fmt.Sprintf("[%s] %s: OnAssign %d", s.clk.Now().Format("04:05.000"), m.name, p))
}

func (s *sim) revoked(m *simMember, p int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.assigned[p] = false
	s.steps = append(s.steps, fmt.Sprintf("[%s] %s: OnRevoke %d", s.clk.Now().Format("04:05.000"), m.name, p))
}

type settleStep int

const (
	outAckStep settleStep = iota
	outNackStep
	outModAckStep
	outDeadLetterStep
)

// takePending removes and returns a random pending delivery of the given
// members, nil if they have none.
func (s *sim) takePending(ms []*simMember) *simDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*simDelivery
	for _, m := range ms {
		all = append(all, m.pending...)
	}
	if len(all) == 0 {
		return nil
	}
	sd := pick(s.rng, all)
	m := sd.m
	m.pending = slices.DeleteFunc(m.pending, func(x *simDelivery) bool { return x == sd })
	return sd
}

// settle settles a random pending delivery of a live member.
func (s *sim) settle(kind settleStep) {
	sd := s.takePending(s.live())
	if sd == nil {
		return
	}
	s.apply(sd, kind)
}

// apply sends kind for sd, checking that a settled delivery stays settled.
func (s *sim) apply(sd *simDelivery, kind settleStep) {
	ctx := context.Background()
	d := sd.d
	if kind == outAckStep || kind == outDeadLetterStep {
		s.mu.Lock()
		s.recs[d.ID].ackSent = true
		s.mu.Unlock()
	}
	var err error
	var what string
	switch kind {
	case outAckStep:
		what, err = "ack", d.Ack(ctx)
	case outNackStep:
		what, err = "nack", d.Nack(ctx, "sim")
	case outModAckStep:
		what, err = "modack", d.ModAck(ctx, s.cfg.ttl)
	case outDeadLetterStep:
		what, err = "dead-letter", d.DeadLetter(ctx, "sim")
	}
	s.logf("%s (%s) %s %s seq %d attempt %d: %v", sd.m.name, sd.m.state, what, d.ID, d.Seq, d.Attempt, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && sd.settled {
		s.violate("%s: %s of %s attempt %d accepted after the attempt was settled", sd.m.name, what, d.ID, d.Attempt)
	}
	if err == nil && kind != outModAckStep {
		sd.settled = true
		if kind != outNackStep {
			s.recs[d.ID].settled++
		}
	}
	if err == nil && kind == outModAckStep && !sd.settled {
		sd.m.pending = append(sd.m.pending, sd) // still in flight
	}
}

// settleAgain settles a delivery twice: the second settle must be
// refused.
func (s *sim) settleAgain() {
	sd := s.takePending(s.live())
	if sd == nil {
		return
	}
	s.apply(sd, outAckStep)
	s.apply(sd, pick(s.rng, []settleStep{outAckStep, outNackStep, outDeadLetterStep}))
}

// lateSettle settles a delivery of a member that stalled, crashed or left.
func (s *sim) lateSettle() {
	var ms []*simMember
	for _, m := range s.members {
		if m.state != live {
			ms = append(ms, m)
		}
	}
	if sd := s.takePending(ms); sd != nil {
		s.apply(sd, pick(s.rng, []settleStep{outAckStep, outAckStep, outNackStep, outDeadLetterStep}))
	}
}

// tick moves the clock by d in steps that let the live members renew.
func (s *sim) tick(d time.Duration) {
	s.logf("clock +%v", d)
	step := s.cfg.ttl / 6
	for d > 0 {
		st := min(step, d)
		s.waitRenewed(st)
		s.clk.Advance(st)
		d -= st
	}
	s.settleTime()
}

// settleTime gives the members' goroutines a moment to act on what just
// happened, without moving the clock: it waits until no delivery has
// reached a handler for a few polls (at most a few milliseconds).
func (s *sim) settleTime() {
	s.waitRenewed(s.cfg.ttl / 6)
	last, quiet := -1, 0
	for i := 0; i < 50 && quiet < 3; i++ {
		s.mu.Lock()
		n := 0
		for _, r := range s.recs {
			n += r.deliveries
		}
		s.mu.Unlock()
		if n == last {
			quiet++
		} else {
			last, quiet = n, 0
		}
		time.Sleep(200 * time.Microsecond) // the members run on their own goroutines
	}
}

// waitRenewed waits until every live member without injected faults
// holds its membership and leases for longer than d from now, so that
// moving the clock by d expires none of them: they renew on their own
// timers, which the clock fires.
func (s *sim) waitRenewed(d time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		now := s.clk.Now()
		var late []string
		for _, m := range s.live() {
			if m.fs.errPct.Load() > 0 {
				continue
			}
			if !m.fs.heldBeyond(now.Add(d)) {
				late = append(late, m.name)
			}
		}
		if len(late) == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.mu.Lock()
			s.violate("members %v did not renew their membership and leases (clock %s)", late, now.Format("04:05.000"))
			s.mu.Unlock()
			return
		}
		time.Sleep(time.Millisecond) // the members run on their own goroutines
	}
}

// leave closes a member: it hands its partitions over.
func (s *sim) leave(m *simMember) {
	s.logf("%s leaves", m.name)
	s.setState(m, left, false)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := m.bus.Close(ctx); err != nil {
		s.mu.Lock()
		s.violate("%s: close: %v", m.name, err)
		s.mu.Unlock()
	}
	s.settleTime()
}

// crash drops a member: from now on none of its store calls lands, as if
// its process was killed; its Bus is closed in the background.
func (s *sim) crash(m *simMember) {
	s.logf("%s crashes", m.name)
	s.setState(m, crashed, true)
	m.fs.down.Store(true)
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = m.bus.Close(ctx)
	}()
}

// stall stops a member past its lease: its store calls fail while the
// clock moves by more than the lease TTL, so the others take its
// partitions.
func (s *sim) stall(m *simMember) {
	s.logf("%s stalls", m.name)
	s.setState(m, stalled, true)
	m.fs.down.Store(true)
	s.tick(s.cfg.ttl + time.Duration(s.rng.IntN(2000))*time.Millisecond)
}

// resume wakes a stalled member.
func (s *sim) resume(m *simMember) {
	s.logf("%s resumes", m.name)
	m.fs.forget()
	m.fs.down.Store(false)
	s.setState(m, live, false)
	s.settleTime()
}

// drain ends the faults and settles everything, then checks what must
// hold once the schedule is over.
func (s *sim) drain() {
	s.logf("drain")
	for _, m := range s.members {
		if m.fs.errPct.Load() > 0 {
			m.fs.forget()
			m.fs.errPct.Store(0)
		}
		if m.state == stalled {
			s.resume(m)
		}
	}
	if len(s.live()) == 0 {
		s.join()
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		for {
			sd := s.takePending(s.live())
			if sd == nil {
				break
			}
			s.apply(sd, outAckStep)
		}
		if s.drained(ctx) || s.failed() {
			break
		}
		if i == 300 {
			s.mu.Lock()
			var open []string
			for _, r := range s.recs {
				if r.settled == 0 {
					open = append(open, fmt.Sprintf("%s (seq %d, partition %d, %d deliveries)", r.id, r.seq, r.part, r.deliveries))
				}
			}
			slices.Sort(open)
			s.violate("lost: %d records never settled after the drain: %s", len(open), strings.Join(open, ", "))
			s.mu.Unlock()
			for _, m := range s.live() {
				s.logf("%s at the end: %+v; in flight %+v", m.name, m.bus.Stats(), m.bus.Deliveries(simTopic, "g"))
			}
			if cur, err := s.store.(event.CursorStore).Cursors(ctx, simTopic, "g"); err == nil {
				s.logf("cursors at the end: %v", cur)
			}
			break
		}
		s.tick(s.cfg.ttl / 3)
	}
	s.closeAll()
	s.checkDLQ(ctx)
}

// drained reports whether every record is settled or dead-lettered and
// every partition's cursor covers its records.
func (s *sim) drained(ctx context.Context) bool {
	dlq, err := s.deadLettered(ctx)
	if err != nil {
		return false
	}
	s.mu.Lock()
	top := make(map[int]uint64)
	for _, r := range s.recs {
		if r.settled == 0 && !dlq[r.id] {
			s.mu.Unlock()
			return false
		}
		top[r.part] = max(top[r.part], r.seq)
	}
	s.mu.Unlock()
	cur, err := s.store.(event.CursorStore).Cursors(ctx, simTopic, "g")
	if err != nil {
		return false
	}
	for p, seq := range top {
		if cur[p] < seq {
			return false
		}
	}
	return true
}

// deadLettered returns the ids of the records in the dead-letter topic.
func (s *sim) deadLettered(ctx context.Context) (map[string]bool, error) {
	out := make(map[string]bool)
	var after uint64
	for {
		rs, err := s.store.Read(ctx, event.DeadLetterTopic(simTopic), after, 256)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			out[r.Headers[event.HeaderDLQID]] = true
			after = r.Seq
		}
		if len(rs) < 256 {
			return out, nil
		}
	}
}

// checkDLQ checks that the records a commit passed with no ack sent are in
// the dead-letter topic.
func (s *sim) checkDLQ(ctx context.Context) {
	dlq, err := s.deadLettered(ctx)
	if err != nil {
		s.t.Fatalf("seed %d: read the dead-letter topic: %v", s.seed, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, why := range s.mustDLQ {
		if !dlq[id] {
			s.violate("%s: %s, and it is not in the dead-letter topic", id, why)
		}
	}
}

// committed checks a cursor commit the store accepted: every record of the
// partition at or below seq was settled, or is dead-lettered (checked at
// the end).
func (s *sim) committed(m *simMember, p event.PartitionRef, seq uint64) {
	if p.Topic != simTopic {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		if r.part == p.Partition && r.seq != 0 && r.seq <= seq && !r.ackSent && r.settled == 0 {
			if _, ok := s.mustDLQ[r.id]; !ok {
				s.mustDLQ[r.id] = fmt.Sprintf("%s committed partition %d at %d past seq %d with no ack sent", m.name, p.Partition, seq, r.seq)
			}
		}
	}
}

func (s *sim) closeAll() {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, m := range s.members {
		if m.state == live || m.state == stalled {
			m.fs.down.Store(false)
			s.setState(m, left, false)
			_ = m.bus.Close(ctx)
		}
	}
	s.closing.Wait()
	if s.pub != nil {
		_ = s.pub.Close(ctx)
		s.pub = nil
	}
}

// simLog puts what the members log into the schedule, so that a failure
// shows what each member saw.
type simLog struct {
	s     *sim
	name  string
	attrs []slog.Attr
}

func (l simLog) Enabled(context.Context, slog.Level) bool { return true }

func (l simLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(l.name + " log: " + r.Message)
	for _, a := range l.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.s.logf("%s", b.String())
	return nil
}

func (l simLog) WithAttrs(as []slog.Attr) slog.Handler {
	l.attrs = append(slices.Clone(l.attrs), as...)
	return l
}

func (l simLog) WithGroup(string) slog.Handler { return l }

// errInjected is the error of a store call the simulation made fail.
var errInjected = errors.New("storetest: injected store error")

// faultStore is a member's view of the shared store's cursors, leases and
// group state: calls fail while the member is down (crashed, stalled) and,
// at a rate, when faults are injected. It checks each cursor commit the
// store accepts, and keeps when the member's membership and leases end.
type faultStore struct {
	s      *sim
	m      *simMember
	cs     event.CursorStore
	ls     event.LeaseStore
	gs     event.GroupStateStore
	odd    bool // the member's number is odd: see leaseStore
	down   atomic.Bool
	errPct atomic.Int32

	mu     sync.Mutex
	rng    *rand.Rand
	member time.Time         // membership held until
	leases map[int]time.Time // leases held, until
}

func newFaultStore(s *sim, m *simMember) *faultStore {
	f := &faultStore{s: s, m: m, rng: rand.New(rand.NewPCG(uint64(s.seed), uint64(s.nth))), leases: map[int]time.Time{}}
	f.cs = s.store.(event.CursorStore)
	f.ls = s.store.(event.LeaseStore)
	f.gs, _ = s.store.(event.GroupStateStore)
	f.odd = s.nth%2 == 1
	if f.gs == nil {
		f.gs = event.NewMemoryStore() // shared by nobody: the store keeps no state
	}
	return f
}

// fail reports whether this call fails, and with what.
func (f *faultStore) fail() error {
	if f.down.Load() {
		return errInjected
	}
	if pct := f.errPct.Load(); pct > 0 {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.rng.IntN(100) < int(pct) {
			return errInjected
		}
	}
	return nil
}

// forget forgets what the member held: it woke, or its store calls stop
// failing, and renews on its own timers from now on.
func (f *faultStore) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.member = time.Time{}
	clear(f.leases)
}

// heldBeyond reports whether the member's membership and every lease it
// holds last beyond t.
func (f *faultStore) heldBeyond(t time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.member.IsZero() {
		return true // not renewed since it joined or woke: nothing to wait for
	}
	if !f.member.After(t) {
		return false
	}
	for _, until := range f.leases {
		if !until.After(t) {
			return false
		}
	}
	return true
}

func (f *faultStore) Cursors(ctx context.Context, topic, group string) (map[int]uint64, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.cs.Cursors(ctx, topic, group)
}

func (f *faultStore) CommitCursor(ctx context.Context, p event.PartitionRef, seq uint64, fence event.Fence) error {
	if err := f.fail(); err != nil {
		return err
	}
	err := f.cs.CommitCursor(ctx, p, seq, fence)
	if err == nil {
		f.s.committed(f.m, p, seq)
	}
	return err
}

func (f *faultStore) SetCursor(ctx context.Context, p event.PartitionRef, seq uint64) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.cs.SetCursor(ctx, p, seq)
}

func (f *faultStore) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	now := f.s.clk.Now()
	ms, err := f.ls.Heartbeat(ctx, topic, group, member, ttl)
	if err == nil {
		f.mu.Lock()
		f.member = now.Add(ttl)
		f.mu.Unlock()
	}
	return ms, err
}

func (f *faultStore) Leave(ctx context.Context, topic, group, member string) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.ls.Leave(ctx, topic, group, member)
}

func (f *faultStore) AcquireLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, bool, error) {
	if err := f.fail(); err != nil {
		return 0, false, err
	}
	now := f.s.clk.Now()
	tok, ok, err := f.ls.AcquireLease(ctx, p, member, ttl)
	if err == nil {
		f.mu.Lock()
		_, had := f.leases[p.Partition]
		if ok {
			f.leases[p.Partition] = now.Add(ttl)
		} else {
			delete(f.leases, p.Partition)
		}
		f.mu.Unlock()
		if ok != had {
			f.s.logf("%s: lease of partition %d: granted %v, token %d", f.m.name, p.Partition, ok, tok)
		}
	}
	return tok, ok, err
}

// leaseStore is the member's LeaseStore: f, or over a store that renews
// in one call ([event.LeaseRenewer]) f with its Renew, for the members
// of odd number (m1, m3, ...). So a schedule of several members runs both
// ways of renewing side by side, as processes of two releases would.
func (f *faultStore) leaseStore() event.LeaseStore {
	if r, ok := f.ls.(event.LeaseRenewer); ok && f.odd {
		return faultRenewer{f, r}
	}
	return f
}

// faultRenewer is a faultStore that renews membership and leases in one
// call, which fails as a whole.
type faultRenewer struct {
	*faultStore
	r event.LeaseRenewer
}

func (f faultRenewer) Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) ([]string, []event.LeaseGrant, error) {
	if err := f.fail(); err != nil {
		return nil, nil, err
	}
	now := f.s.clk.Now()
	ms, grants, err := f.r.Renew(ctx, topic, group, member, ttl, parts)
	if err != nil {
		return ms, grants, err
	}
	type change struct {
		p   int
		ok  bool
		tok uint64
	}
	var changed []change
	f.mu.Lock()
	f.member = now.Add(ttl)
	for _, g := range grants {
		_, had := f.leases[g.Partition]
		if g.Held {
			f.leases[g.Partition] = now.Add(ttl)
		} else {
			delete(f.leases, g.Partition)
		}
		if g.Held != had {
			changed = append(changed, change{g.Partition, g.Held, g.Token})
		}
	}
	f.mu.Unlock()
	for _, c := range changed {
		f.s.logf("%s: lease of partition %d: granted %v, token %d (renewal)", f.m.name, c.p, c.ok, c.tok)
	}
	return ms, grants, nil
}

func (f *faultStore) TakeLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, error) {
	if err := f.fail(); err != nil {
		return 0, err
	}
	return f.ls.TakeLease(ctx, p, member, ttl)
}

func (f *faultStore) ReleaseLease(ctx context.Context, p event.PartitionRef, member string) error {
	if err := f.fail(); err != nil {
		return err
	}
	err := f.ls.ReleaseLease(ctx, p, member)
	if err == nil {
		f.mu.Lock()
		delete(f.leases, p.Partition)
		f.mu.Unlock()
		f.s.logf("%s: lease of partition %d released", f.m.name, p.Partition)
	}
	return err
}

func (f *faultStore) GroupState(ctx context.Context, p event.PartitionRef) (event.GroupState, error) {
	if err := f.fail(); err != nil {
		return event.GroupState{}, err
	}
	return f.gs.GroupState(ctx, p)
}

func (f *faultStore) UpdateGroupState(ctx context.Context, p event.PartitionRef, u event.GroupStateUpdate, fence event.Fence) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.gs.UpdateGroupState(ctx, p, u, fence)
}

func (f *faultStore) ResetGroupState(ctx context.Context, p event.PartitionRef) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.gs.ResetGroupState(ctx, p)
}
