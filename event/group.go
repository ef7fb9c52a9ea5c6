package event

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/internal/offstack"
)

var groupSeq atomic.Uint64

// group is the consumer of one (topic, group) in a Bus: it owns partitions,
// reads their records, hands them to the group's subscriptions and keeps
// the leases, retries and cursors.
type group struct {
	b        *Bus
	topic    string
	name     string
	key      groupKey
	member   string
	cfgKey   groupKey // the group whose settings it delivers by
	startSeq uint64
	// cfg is the group's settings, as last read from the store (see
	// setConfig); deliveries read it when they start and end.
	cfg atomic.Pointer[GroupConfig]

	mu        sync.Mutex
	subs      []*Subscription
	rr        int
	hasFilter bool

	// hooks are the rebalance hooks of the group's subscriptions in this
	// Bus, kept after a subscription leaves (its partitions are revoked
	// after it); appended under mu, called by the run loop and close.
	hooks []SubscribeOptions

	maxInFlight int
	parts       map[int]*partState
	fresh       []*entry
	freshHead   int
	retry       entryHeap  // by seq
	waiting     entryHeap  // by backoff end
	leases      leaseQueue // by lease end
	dlq         []*entry
	// byID indexes the unsettled entries (delivered at least once, not
	// settled) by id, for acks that name a record by id ([Bus.Ack]). It is
	// built on the first such ack: a group whose deliveries are settled
	// through their Delivery never pays for it (see unsettled).
	byID      map[string]*entry
	nInflight int
	nHeld     int // waiting, retry, dlq and held behind a key
	dirty     bool
	dataMaybe bool // the store may hold records not read yet
	stopping  bool

	// Key order (group_keys.go): set for a key-ordered group.
	keyOrdered bool
	maxPerKey  int
	keys       map[string]*keyState
	nKeyHeld   int  // held behind a key (counted in nHeld too)
	keyMoved   bool // a held record became due while the fresh ones were handed out

	local InProcessStore // the store, when it is one (see read)

	newData atomic.Bool
	resync  atomic.Bool   // a write was refused for its fence: renew the leases now
	wake    chan struct{} // the run loop: store I/O

	// The timer of the leases' and backoffs' ends (see timers), made on
	// the first deadline: an idle group holds no timer and no goroutine
	// for them. Under mu.
	timer     clock.Timer
	armed     time.Time      // what timer is armed for; zero: not armed
	firing    bool           // timers runs, and arms the timer as it ends
	timersOff bool           // the group stopped: the timer is armed no more
	timerRuns sync.WaitGroup // calls of timers scheduled or running

	quit chan struct{}
	done chan struct{}
	// runCtx is the context of the run loop's store calls: it ends when
	// the group stops (stopRun, with quit), cutting a call under way.
	runCtx  context.Context
	stopRun context.CancelFunc
	notify  <-chan struct{}
	unwatch func()

	redrives redriveWatch // see redrive.go
}

// startGroup starts the consumer of group name on topic in this Bus, with
// the group's settings cfg (kept with the group of cfgTopic: topic, or for
// a redrive topic the group's topic). A group without cursors gets them at
// the start position of start.
func (b *Bus) startGroup(ctx context.Context, topic, name, cfgTopic string, cfg, start *GroupConfig, o *SubscribeOptions) (*group, error) {
	cur, err := b.cfg.Cursors.Cursors(ctx, topic, name)
	if err != nil {
		return nil, fmt.Errorf("event: read cursor of group %q on %q: %w", name, topic, err)
	}
	n, err := b.partitionsOf(ctx, topic)
	if err != nil {
		return nil, err
	}
	var from uint64
	if len(cur) == 0 {
		if from, err = b.resolve(ctx, topic, start.Start); err != nil {
			return nil, err
		}
		for p := 0; p < n; p++ {
			if err := b.cfg.Cursors.CommitCursor(ctx, PartitionRef{Topic: topic, Group: name, Partition: p}, from, Fence{}); err != nil {
				return nil, fmt.Errorf("event: create cursor of group %q on %q: %w", name, topic, err)
			}
		}
	}
	g := &group{
		b: b, topic: topic, name: name, key: groupKey{topic, name},
		member:    b.cfg.MemberID + "/" + strconv.FormatUint(groupSeq.Add(1), 10),
		cfgKey:    groupKey{cfgTopic, name},
		startSeq:  from,
		parts:     make(map[int]*partState),
		dataMaybe: true,
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	g.runCtx, g.stopRun = context.WithCancel(context.Background())
	g.local, _ = b.store.(InProcessStore)
	g.cfg.Store(cfg)
	if cfg.KeyOrdered {
		g.keyOrdered, g.keys = true, make(map[string]*keyState)
	}
	g.addHooks(o) // before run takes a partition
	g.retry.less = func(a, b *entry) bool { return a.d.Seq < b.d.Seq }
	g.waiting.less = func(a, b *entry) bool { return a.deadline.Before(b.deadline) }
	g.leases = newLeaseQueue()
	if b.notifier != nil {
		g.notify, g.unwatch = b.notifier.Watch(topic)
	}
	b.wg.Add(1)
	go g.run()
	return g, nil
}

// poke tells the consumer that the store may have new records.
func (g *group) poke() {
	g.newData.Store(true)
	g.signal()
}

// signal wakes the store loop: there is something to read, commit or
// dead-letter.
func (g *group) signal() { wakeUp(g.wake) }

// rearm tells the timer of a lease or backoff deadline d, called with
// g.mu held. The timer is re-armed only when d is earlier than what it is
// armed for: a timer that fires early finds nothing due and is armed
// again, which costs one arm per deadline instead of one per delivered
// batch. While timers runs it arms the timer as it ends, for the earliest
// deadline then, d included.
func (g *group) rearm(d time.Time) {
	if g.firing || g.timersOff || (!g.armed.IsZero() && !d.Before(g.armed)) {
		return
	}
	if g.timer == nil {
		g.timerRuns.Add(1)
		g.timer = g.b.clk.AfterFunc(time.Hour, g.timers)
		if g.timer.Stop() {
			g.timerRuns.Done()
		} // else it fires now (a fake clock moved an hour): it finds g.mu held, then d
	}
	g.armed = d
	// Armed for d, not for a duration from a reading of the clock, as in
	// run. Reset of an armed timer moves its one call; of a timer that
	// fired (its call may be running) it schedules another.
	if !clock.ResetAt(g.b.clk, g.timer, d) {
		g.timerRuns.Add(1)
	}
}

func wakeUp(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run is the group's store loop: membership, reads, commits and
// dead-letter publishes, and the watch on the group's redrive topic
// (redrive.go). Leases and backoffs run out in a timer's call (timers),
// so an expiry never waits for a slow store call. The work is done by
// turn: while the loop waits, its stack holds only run's small frame, so
// the runtime shrinks an idle group's stack to the smallest size.
func (g *group) run() {
	defer g.b.wg.Done()
	defer close(g.done)
	defer g.stopTimers()
	defer g.redrives.stop()
	defer g.stopRun()

	clk := g.b.clk
	timer := clk.NewTimer(time.Hour)
	defer timer.Stop()
	var due runDue
	// The first turn and the turns the timer starts (the renewals, polls
	// and commits of an idle group) run off the loop's stack, which an
	// idle group would otherwise hold at the size of its deepest store
	// call (package offstack); the turns that data and acks start run on
	// it, as a busy group takes thousands a second.
	off := true
	for {
		var next time.Time
		if off {
			offstack.Run(func() { next = g.turn(&due) })
		} else {
			next = g.turn(&due)
		}
		off = false
		if next.IsZero() {
			// Something is due already: go round instead of arming the
			// timer.
			select {
			case <-g.quit:
				return
			default:
				continue
			}
		}
		// Armed for next, not for a duration from a reading of the clock:
		// the clock may move before the timer is armed (a fake clock
		// another goroutine advances, a loop descheduled in between), and
		// a duration would then count from later, past the leases'
		// renewal. Reset leaves no stale tick on the channel (Go 1.23
		// timers).
		clock.ResetAt(clk, timer, next)
		select {
		case <-g.quit:
			return
		case <-g.wake:
		case <-g.notify:
			g.newData.Store(true)
		case <-g.redrives.notify:
			g.redrives.due = true
		case <-timer.C():
			off = true
		}
	}
}

// runDue is when the run loop's periodic work is due next.
type runDue struct {
	sync, commit, poll time.Time
}

// turn is one turn of the run loop: it does what is due, and returns when
// the loop is to go round next; zero for at once.
func (g *group) turn(due *runDue) time.Time {
	ctx := g.runCtx
	cfg := &g.b.cfg
	clk := g.b.clk
	now := clk.Now()
	if g.resync.Swap(false) || !now.Before(due.sync) {
		// The next renewal counts from when this one began: the leases
		// it renews run from then, so a slow store must not push the
		// next renewal past their end.
		due.sync = now.Add(cfg.LeaseTTL / 3)
		g.syncLeases(ctx)
		now = clk.Now()
	}
	if g.notify == nil && !now.Before(due.poll) {
		g.newData.Store(true)
		due.poll = now.Add(cfg.PollInterval)
	}
	if g.newData.Swap(false) {
		g.mu.Lock()
		g.dataMaybe = true
		g.mu.Unlock()
	}
	nextRedrive := g.watchRedrives(ctx, now)
	g.deadLetter(ctx, now)
	if !now.Before(due.commit) && g.isDirty() {
		g.commit(ctx)
		due.commit = now.Add(cfg.CommitInterval)
	}
	if g.fetch(ctx) {
		return time.Time{}
	}

	next := due.sync
	if g.notify == nil && due.poll.Before(next) {
		next = due.poll
	}
	if !nextRedrive.IsZero() && nextRedrive.Before(next) {
		next = nextRedrive
	}
	g.mu.Lock()
	for _, e := range g.dlq {
		if e.deadline.Before(next) {
			next = e.deadline
		}
	}
	if g.dirty && due.commit.Before(next) {
		next = due.commit
	}
	g.mu.Unlock()
	if !next.After(clk.Now()) {
		return time.Time{}
	}
	return next
}

// timers is the call of the group's timer: it ends the leases and
// backoffs that ran out, then arms the timer for the next end. It takes
// only g.mu, never a store call. Two calls never overlap: a call that
// finds another running returns at once, and the running one arms the
// timer for the earliest deadline as it ends, under g.mu, so no deadline
// that came in the meantime is left without a timer.
func (g *group) timers() {
	defer g.timerRuns.Done()
	g.mu.Lock()
	if g.firing || g.timersOff {
		g.mu.Unlock()
		return
	}
	g.firing = true
	g.armed = time.Time{}
	g.mu.Unlock()
	clk := g.b.clk
	for {
		g.expire(clk.Now())
		g.mu.Lock()
		var next time.Time
		for _, e := range [...]*entry{g.leases.peek(), g.waiting.peek()} {
			if e != nil && (next.IsZero() || e.deadline.Before(next)) {
				next = e.deadline
			}
		}
		if !next.IsZero() && !g.timersOff && !next.After(clk.Now()) {
			g.mu.Unlock()
			continue // due already: go round instead of arming the timer
		}
		g.firing = false
		if !next.IsZero() && !g.timersOff {
			g.armed = next
			if !clock.ResetAt(clk, g.timer, next) { // for next, as in run
				g.timerRuns.Add(1)
			}
		}
		g.mu.Unlock()
		return
	}
}

// stopTimers stops the timer and waits for a call of timers that runs:
// none runs after it returns.
func (g *group) stopTimers() {
	g.mu.Lock()
	g.timersOff = true
	if g.timer != nil && g.timer.Stop() {
		g.timerRuns.Done() // its scheduled call will not come
	}
	g.mu.Unlock()
	g.timerRuns.Wait()
}

func (g *group) isDirty() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dirty
}

// fetch reads the next batch when there is room for it, and reports
// whether another batch may be waiting right away.
func (g *group) fetch(ctx context.Context) bool {
	batch := g.b.cfg.ReadBatch
	g.mu.Lock()
	after, ok := g.readFrom()
	g.mu.Unlock()
	if !ok {
		return false
	}
	recs, err := g.read(ctx, after, batch)
	if g.local != nil {
		defer putReadBuf(recs)
	}
	if err != nil {
		if ctx.Err() == nil {
			g.b.log.Warn("event: read failed", "topic", g.topic, "group", g.name, "err", err)
		}
		return false
	}
	if len(recs) == 0 || recs[0].Seq > after+1 {
		g.checkFloor(ctx, after)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.absorb(recs, after) // copied into the entries: the buffer goes back
}

// readFrom returns the seq after which the next read starts, and false
// when there is nothing to read or no room for it. Called with g.mu held.
func (g *group) readFrom() (uint64, bool) {
	if g.stopping || !g.dataMaybe || len(g.fresh)-g.freshHead >= g.b.cfg.ReadBatch {
		return 0, false
	}
	after := uint64(math.MaxUint64)
	for _, p := range g.parts {
		if !p.draining && p.readPos < after {
			after = p.readPos
		}
	}
	return after, after != math.MaxUint64
}

// absorb turns recs, read after seq after, into entries, hands them out,
// and reports whether another batch may be waiting right away. Called
// with g.mu held.
func (g *group) absorb(recs []Record, after uint64) bool {
	batch := g.b.cfg.ReadBatch
	// One allocation for the batch's entries: they live about as long as
	// each other, and the consumer's hot path allocates nothing per record.
	es := make([]entry, len(recs))
	var p *partState
	pid := -1
	for i := range recs {
		if recs[i].Partition != pid { // the map is read when the partition changes
			pid = recs[i].Partition
			p = g.parts[pid]
		}
		if p == nil || p.draining || recs[i].Seq <= p.readPos {
			// Not this member's to deliver: a partition it does not own
			// or gives up, or a record it read already.
			continue
		}
		attempts, settled := p.gs.restored(recs[i].Seq)
		if settled {
			continue // settled before this member took the partition
		}
		// es is zeroed: set fields in place (a composite literal would be
		// built on the stack and copied, twice the bytes moved).
		e := &es[i]
		e.d.Record, e.d.Group, e.d.g, e.d.e = recs[i], g.name, g, e
		e.part, e.hidx, e.attempt = p, -1, attempts
		p.out = append(p.out, e)
		g.fresh = append(g.fresh, e)
	}
	if len(recs) > 0 {
		last := recs[len(recs)-1].Seq
		// Every record of a partition read from after on up to last is in
		// recs: the partitions read from at or below after have read up
		// to last. A draining partition keeps its read position (see
		// partState).
		for _, p := range g.parts {
			if !p.draining && p.readPos >= after && p.readPos < last {
				p.readPos = last
			}
		}
		g.dirty = true
	}
	g.dataMaybe = len(recs) == batch
	g.dispatch(g.b.clk.Now())
	return g.dataMaybe && len(g.fresh)-g.freshHead < batch
}

// read reads the next records of the topic. From an [InProcessStore] it
// reads into the group's own buffer, which fetch clears once the records
// are in their entries: one buffer per group instead of one per read.
func (g *group) read(ctx context.Context, after uint64, limit int) ([]Record, error) {
	if g.local == nil {
		return g.b.store.Read(ctx, g.topic, after, limit)
	}
	return g.local.ReadInto(ctx, g.topic, after, limit, getReadBuf(limit))
}

// readBufs holds the buffers groups read an in-process store into, shared
// by every group: a group holds one only while it reads and absorbs a
// batch (fetch), so an idle group holds none (a batch of ReadBatch records
// is tens of KB).
var readBufs sync.Pool

// getReadBuf returns an empty buffer for limit records.
func getReadBuf(limit int) []Record {
	if p, ok := readBufs.Get().(*[]Record); ok && cap(*p) >= limit {
		return (*p)[:0]
	}
	return make([]Record, 0, limit)
}

// putReadBuf gives back a buffer of getReadBuf, cleared: it keeps no
// record alive. ReadInto appends to the empty buffer, so only the records
// it returned are cleared, not the whole array: a read of a few records
// into a buffer of ReadBatch clears a few.
func putReadBuf(recs []Record) {
	if cap(recs) == 0 {
		return
	}
	clear(recs)
	recs = recs[:0]
	readBufs.Put(&recs)
}

// checkFloor handles a group that fell behind retention: records after
// its read position were deleted before it read them. They cannot be
// delivered; the group is told (an error in the log, Observer.Skipped) and
// moves on to the floor, as the package doc says.
func (g *group) checkFloor(ctx context.Context, after uint64) {
	pr, ok := g.b.store.(Pruner)
	if !ok {
		return
	}
	floor, err := pr.Floor(ctx, g.topic)
	if err != nil || floor <= after+1 {
		return
	}
	missed := floor - 1 - after
	g.b.log.Error("event: consumer group fell behind retention; deleted records skipped",
		"topic", g.topic, "group", g.name, "from_seq", after+1, "to_seq", floor-1, "missed", missed)
	g.b.obs.Skipped(g.topic, g.name, missed)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.parts {
		if !p.draining && p.readPos < floor-1 {
			p.readPos = floor - 1
		}
	}
	g.markDirty()
}

// dispatch hands ready records to subscriptions with room, in seq order.
func (g *group) dispatch(now time.Time) {
	g.dispatchReady(now)
	for _, s := range g.subs {
		if len(s.batch) > 0 {
			s.enqueue(s.batch)
			clear(s.batch)
			s.batch = s.batch[:0]
		}
	}
}

// dispatchReady hands out the ready records: retries first, then fresh
// records, each in seq order. A record whose subscription has no room waits
// without holding back the records of partitions other subscriptions serve.
func (g *group) dispatchReady(now time.Time) {
	if len(g.subs) == 0 {
		return
	}
	room := 0
	for _, s := range g.subs {
		if s.hasRoom() {
			room++
		}
	}
	if room == 0 {
		return
	}
	room = g.dispatchRetries(now, room)
	// Fresh records, compacting the queue over the ones that wait.
	w, i := g.freshHead, g.freshHead
	for ; i < len(g.fresh) && room > 0 && g.nInflight+g.nHeld < g.maxInFlight; i++ {
		e := g.fresh[i]
		if g.keyOrdered && e.d.Key != "" {
			switch g.gate(e) {
			case keyHeld:
				continue
			case keyFull:
				g.fresh[w] = e
				w++
				continue
			}
		}
		switch s, accepted := g.pick(e, now); {
		case !accepted:
			g.settle(e)
		case s == nil:
			g.fresh[w] = e
			w++
		case e.attempt >= g.policy().MaxAttempts:
			g.exhausted(e, s, now)
		default:
			g.deliver(e, s, now)
			if !s.hasRoom() {
				room--
			}
		}
	}
	if w != i {
		w += copy(g.fresh[w:], g.fresh[i:])
		clear(g.fresh[w:])
		g.fresh = g.fresh[:w]
	}
	if g.freshHead == len(g.fresh) {
		g.fresh, g.freshHead = g.fresh[:0], 0
	}
	if g.keyMoved {
		// A fresh record settled at once (filtered out) let the next of its
		// key become due.
		g.keyMoved = false
		g.dispatchRetries(now, room)
	}
}

// dispatchRetries hands out the due retries in seq order while room
// subscriptions have room, and returns how many still have. A retry of a
// partition is below its fresh records, so retries go first.
func (g *group) dispatchRetries(now time.Time, room int) int {
	var held []*entry
	for room > 0 {
		e := g.retry.peek()
		if e == nil {
			break
		}
		g.retry.pop()
		switch s, accepted := g.pick(e, now); {
		case !accepted:
			g.nHeld--
			g.settle(e)
		case s == nil:
			held = append(held, e)
		case e.attempt >= g.policy().MaxAttempts:
			g.nHeld--
			g.exhausted(e, s, now)
		default:
			g.nHeld--
			g.deliver(e, s, now)
			if !s.hasRoom() {
				room--
			}
		}
	}
	for _, e := range held {
		g.retry.push(e)
	}
	return room
}

// hasRoom reports whether s takes deliveries now; called with g.mu held.
func (s *Subscription) hasRoom() bool {
	return !s.paused && !s.closing && s.inflight < s.opts.MaxInFlight && !s.stalled.Load()
}

// pick returns the subscription e goes to now (nil: it waits), and whether
// any subscription accepts e at all. A record goes to the subscription its
// partition is assigned to, once the partition's deliveries to another one
// are settled; a record that subscription's filter refuses goes to another
// subscription that accepts it, round robin.
func (g *group) pick(e *entry, now time.Time) (*Subscription, bool) {
	p := e.part
	if now.After(p.leaseUntil) {
		return nil, true
	}
	if s := p.sub; s != nil && (s.opts.Filter == nil || s.opts.Filter(&e.d.Record)) {
		if !s.hasRoom() || (p.inflight > 0 && p.holder != s) {
			return nil, true
		}
		return s, true
	} else if !g.hasFilter {
		return nil, true // no subscription serves the partition now
	}
	accepted := false
	n := len(g.subs)
	for i := 0; i < n; i++ {
		s := g.subs[(g.rr+i)%n]
		if s.opts.Filter != nil && !s.opts.Filter(&e.d.Record) {
			continue
		}
		accepted = true
		if s == p.sub || !s.hasRoom() {
			continue
		}
		g.rr = (g.rr + i + 1) % n
		return s, true
	}
	return nil, accepted
}

// assign shares the owned partitions out among the subscriptions that take
// deliveries, as the group's members share the partitions: each partition
// is served by one subscription at a time. A partition that moves waits
// until its deliveries to the previous subscription are settled (pick).
// Called with g.mu held whenever the partitions or the subscriptions
// change.
func (g *group) assign() {
	active := make([]*Subscription, 0, len(g.subs))
	for _, s := range g.subs {
		if !s.paused && !s.closing && !s.stalled.Load() {
			active = append(active, s)
		}
	}
	ids := make([]int, 0, len(g.parts))
	for id := range g.parts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, id := range ids {
		p := g.parts[id]
		p.sub = nil
		if len(active) > 0 {
			p.sub = active[i%len(active)]
		}
	}
}

func (g *group) deliver(e *entry, s *Subscription, now time.Time) {
	e.attempt++
	e.gen++
	e.state = stInflight
	pol := g.policy()
	e.sub, e.opts, e.lease = s, &s.opts, pol.AckTimeout
	e.deadline = now.Add(e.lease)
	g.leases.push(e)
	g.rearm(e.deadline) // re-arms the timer only for an earlier deadline
	if e.gen == 1 && g.byID != nil {
		g.byID[e.d.ID] = e
	}
	s.inflight++
	e.part.inflight++
	e.part.holder = s
	g.nInflight++
	g.b.obs.Delivered(g.topic, g.name, e.attempt)
	dc := DeliveryContext{Attempt: e.attempt, MaxAttempts: pol.MaxAttempts, Deadline: e.deadline}
	d := &e.d
	if e.gen == 1 {
		d.DeliveryContext = dc
	} else {
		d = &Delivery{Record: e.d.Record, DeliveryContext: dc, Group: g.name, g: g, e: e}
	}
	d.gen, d.lease = e.gen, e.lease
	s.batch = append(s.batch, d)
}

func (g *group) addSub(s *Subscription) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.subs) > 0 {
		g.addHooks(&s.opts) // the first one's are in since startGroup
	}
	g.subs = append(g.subs, s)
	g.maxInFlight += s.opts.MaxInFlight
	g.hasFilter = g.hasFilter || s.opts.Filter != nil
	g.setMaxPerKey()
	g.assign()
	g.dispatch(g.b.clk.Now())
}

// removeSub takes s out of the group and gives its in-flight deliveries
// back at once (they are redelivered without backoff). It reports how many
// subscriptions remain.
func (g *group) removeSub(s *Subscription) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.subs, s)
	if i < 0 {
		return len(g.subs)
	}
	g.subs = slices.Delete(g.subs, i, i+1)
	g.maxInFlight -= s.opts.MaxInFlight
	g.hasFilter = slices.ContainsFunc(g.subs, func(s *Subscription) bool { return s.opts.Filter != nil })
	g.setMaxPerKey()
	for _, e := range g.unsettled() {
		if e.state == stInflight && e.sub == s {
			g.endLease(e)
			if e.part.draining {
				g.drop(e)
				continue
			}
			if e.takeBack() {
				e.attempt-- // it waited in s's queue: no handler saw it
			}
			e.state = stRetry
			g.retry.push(e)
			g.nHeld++
		}
	}
	g.assign()
	g.dispatch(g.b.clk.Now())
	return len(g.subs)
}

// shutdown stops the consumer: its subscriptions are closed (handlers
// drained until ctx ends), then cursors are committed and partitions
// released.
func (g *group) shutdown(ctx context.Context) error {
	g.mu.Lock()
	subs := slices.Clone(g.subs)
	g.mu.Unlock()
	var errs []error
	for _, s := range subs {
		if err := s.close(ctx, false); err != nil {
			errs = append(errs, err)
		}
	}
	g.mu.Lock()
	already := g.stopping
	g.stopping = true
	g.mu.Unlock()
	if already {
		<-g.done
		return errors.Join(errs...)
	}
	close(g.quit)
	g.stopRun()
	<-g.done
	if g.unwatch != nil {
		g.unwatch()
	}
	g.mu.Lock()
	parts := make([]*partState, 0, len(g.parts))
	for _, p := range g.parts {
		parts = append(parts, p)
	}
	g.mu.Unlock()
	// Committing and releasing must happen even when ctx has ended, or the
	// partitions stay leased until they expire; bound it on its own.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, p := range parts {
		g.mu.Lock()
		g.startDrain(p)
		g.dropInflight(p)
		g.mu.Unlock()
		g.handOver(fctx, p, true)
	}
	if err := g.b.cfg.Leases.Leave(fctx, g.topic, g.name, g.member); err != nil {
		g.b.log.Warn("event: leave group failed", "topic", g.topic, "group", g.name, "err", err)
	}
	g.b.removeGroup(g)
	return errors.Join(errs...)
}

func (g *group) stats() GroupStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := GroupStats{
		Topic: g.topic, Group: g.name, InFlight: g.nInflight, Waiting: g.nHeld, Held: g.nKeyHeld,
		Buffered: len(g.fresh) - g.freshHead, Subscribers: len(g.subs),
	}
	first := true
	for id, p := range g.parts {
		st.Partitions = append(st.Partitions, id)
		if first || p.committed < st.Committed {
			st.Committed, first = p.committed, false
		}
	}
	slices.Sort(st.Partitions)
	return st
}
