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

	"github.com/google/uuid"
)

// entryState is where a read record is in its life in a group.
type entryState uint8

const (
	stFresh    entryState = iota // read, never delivered
	stInflight                   // delivered, lease running
	stWaiting                    // failed, waiting for its backoff
	stRetry                      // due for redelivery
	stDLQ                        // to be moved to the dead-letter topic
	stSettled                    // acked, dead-lettered or filtered out
	stDropped                    // given up with its partition
)

type entry struct {
	// d is the first delivery; its Record is the entry's record. Later
	// attempts get Delivery values of their own, so a handler's Delivery
	// never changes under it.
	d       Delivery
	part    *partState
	state   entryState
	attempt int
	// gen counts deliveries, attempts or not (see expire); started holds
	// the gen of the last delivery a handler goroutine picked up.
	gen       uint32
	started   atomic.Uint32
	startedAt atomic.Int64 // Unix ns, written before started
	sub       *Subscription
	opts      *SubscribeOptions // of the subscription that delivered it last
	deadline  time.Time         // lease end, backoff end or next dead-letter try
	reason    string
	hidx      int
}

// partState is a partition owned by this member.
type partState struct {
	id         int
	readPos    uint64   // highest seq read for this partition
	committed  uint64   // highest seq committed to the CursorStore
	out        []*entry // read and not yet settled, in seq order, from head
	head       int
	inflight   int
	leaseUntil time.Time
	draining   bool   // being handed over: no new deliveries
	stopAt     uint64 // while draining: the cursor never passes it
}

// candidate is the highest seq below which everything read is settled.
func (p *partState) candidate() uint64 {
	c := p.readPos
	if p.head < len(p.out) {
		c = p.out[p.head].d.Seq - 1
	}
	if p.draining && p.stopAt < c {
		c = p.stopAt
	}
	return c
}

// advance pops settled and dropped entries off the front.
func (p *partState) advance() {
	for p.head < len(p.out) {
		if st := p.out[p.head].state; st != stSettled && st != stDropped {
			break
		}
		p.out[p.head] = nil
		p.head++
	}
	switch {
	case p.head == len(p.out):
		p.out, p.head = p.out[:0], 0
	case p.head > 1024 && p.head > len(p.out)/2:
		n := copy(p.out, p.out[p.head:])
		clear(p.out[n:])
		p.out, p.head = p.out[:n], 0
	}
}

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
	startSeq uint64

	mu          sync.Mutex
	subs        []*Subscription
	rr          int
	hasFilter   bool
	maxInFlight int
	parts       map[int]*partState
	fresh       []*entry
	freshHead   int
	retry       entryHeap // by seq
	waiting     entryHeap // by backoff end
	leases      entryHeap // by lease end
	dlq         []*entry
	unsettled   map[string]*entry // delivered at least once and not settled, by id
	nInflight   int
	nHeld       int // waiting, retry and dlq
	dirty       bool
	dataMaybe   bool // the store may hold records not read yet
	stopping    bool

	newData atomic.Bool
	wake    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	notify  <-chan struct{}
	unwatch func()
}

func (b *Bus) startGroup(ctx context.Context, topic, name string, o *SubscribeOptions) (*group, error) {
	cur, err := b.cfg.Cursors.Cursors(ctx, topic, name)
	if err != nil {
		return nil, fmt.Errorf("event: read cursor of group %q on %q: %w", name, topic, err)
	}
	var start uint64
	if len(cur) == 0 {
		if start, err = b.resolveStart(ctx, topic, o); err != nil {
			return nil, err
		}
		for p := 0; p < b.cfg.Partitions; p++ {
			if err := b.cfg.Cursors.CommitCursor(ctx, topic, name, p, start); err != nil {
				return nil, fmt.Errorf("event: create cursor of group %q on %q: %w", name, topic, err)
			}
		}
	}
	g := &group{
		b: b, topic: topic, name: name, key: groupKey{topic, name},
		member:    b.cfg.MemberID + "/" + strconv.FormatUint(groupSeq.Add(1), 10),
		startSeq:  start,
		parts:     make(map[int]*partState),
		unsettled: make(map[string]*entry),
		dataMaybe: true,
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	g.retry.less = func(a, b *entry) bool { return a.d.Seq < b.d.Seq }
	g.waiting.less = func(a, b *entry) bool { return a.deadline.Before(b.deadline) }
	g.leases.less = g.waiting.less
	if b.notifier != nil {
		g.notify, g.unwatch = b.notifier.Watch(topic)
	}
	b.wg.Add(1)
	go g.run()
	return g, nil
}

// resolveStart turns a start position into the seq after which a new group
// begins.
func (b *Bus) resolveStart(ctx context.Context, topic string, o *SubscribeOptions) (uint64, error) {
	switch o.Start {
	case StartEarliest:
		return 0, nil
	case StartSeq:
		return o.StartSeq - 1, nil
	case StartTS:
		seq, ok, err := b.store.FirstSeqAtOrAfter(ctx, topic, o.StartTS)
		if err != nil {
			return 0, fmt.Errorf("event: find start ts in %q: %w", topic, err)
		}
		if ok {
			return seq - 1, nil
		}
	case StartAfterID:
		r, err := b.store.FindByID(ctx, topic, o.StartAfterID)
		if errors.Is(err, ErrNotFound) {
			return 0, invalid("afterId", "no record with id %q in topic %q", o.StartAfterID, topic)
		}
		if err != nil {
			return 0, fmt.Errorf("event: find start id in %q: %w", topic, err)
		}
		return r.Seq, nil
	}
	head, err := b.store.Head(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("event: head of %q: %w", topic, err)
	}
	return head, nil
}

// poke tells the consumer that the store may have new records.
func (g *group) poke() {
	g.newData.Store(true)
	g.signal()
}

func (g *group) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *group) run() {
	defer g.b.wg.Done()
	defer close(g.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-g.quit:
			cancel()
		case <-ctx.Done():
		}
	}()

	cfg := &g.b.cfg
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var nextSync, nextCommit, nextPoll time.Time
	for {
		now := time.Now()
		if !now.Before(nextSync) {
			g.syncLeases(ctx)
			now = time.Now()
			nextSync = now.Add(cfg.LeaseTTL / 3)
		}
		if g.notify == nil && !now.Before(nextPoll) {
			g.newData.Store(true)
			nextPoll = now.Add(cfg.PollInterval)
		}
		if g.newData.Swap(false) {
			g.mu.Lock()
			g.dataMaybe = true
			g.mu.Unlock()
		}
		g.expire(now)
		g.deadLetter(ctx, now)
		if !now.Before(nextCommit) && g.isDirty() {
			g.commit(ctx)
			nextCommit = now.Add(cfg.CommitInterval)
		}
		if g.fetch(ctx) {
			select {
			case <-g.quit:
				return
			default:
				continue
			}
		}

		next := nextSync
		if g.notify == nil && nextPoll.Before(next) {
			next = nextPoll
		}
		g.mu.Lock()
		for _, h := range []*entryHeap{&g.leases, &g.waiting} {
			if e := h.peek(); e != nil && e.deadline.Before(next) {
				next = e.deadline
			}
		}
		for _, e := range g.dlq {
			if e.deadline.Before(next) {
				next = e.deadline
			}
		}
		if g.dirty && nextCommit.Before(next) {
			next = nextCommit
		}
		g.mu.Unlock()
		timer.Reset(max(time.Until(next), 0))
		select {
		case <-g.quit:
			return
		case <-g.wake:
		case <-g.notify:
			g.newData.Store(true)
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
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
	if g.stopping || !g.dataMaybe || len(g.fresh)-g.freshHead >= batch {
		g.mu.Unlock()
		return false
	}
	after := uint64(math.MaxUint64)
	for _, p := range g.parts {
		if !p.draining && p.readPos < after {
			after = p.readPos
		}
	}
	g.mu.Unlock()
	if after == math.MaxUint64 {
		return false
	}
	recs, err := g.b.store.Read(ctx, g.topic, after, batch)
	if err != nil {
		if ctx.Err() == nil {
			g.b.log.Warn("event: read failed", "topic", g.topic, "group", g.name, "err", err)
		}
		return false
	}
	if len(recs) == 0 || recs[0].Seq > after+1 {
		g.checkFloor(ctx, after)
	}
	n := g.b.cfg.Partitions
	g.mu.Lock()
	defer g.mu.Unlock()
	// One allocation for the batch's entries: they live about as long as
	// each other, and the consumer's hot path allocates nothing per record.
	es := make([]entry, len(recs))
	for i := range recs {
		p := g.parts[recs[i].Partition%n]
		if p == nil || p.draining || recs[i].Seq <= p.readPos {
			continue
		}
		e := &es[i]
		*e = entry{d: Delivery{Record: recs[i], Group: g.name, g: g}, part: p, hidx: -1}
		e.d.e = e
		p.out = append(p.out, e)
		g.fresh = append(g.fresh, e)
	}
	if len(recs) > 0 {
		last := recs[len(recs)-1].Seq
		for _, p := range g.parts {
			if p.readPos >= after && p.readPos < last {
				p.readPos = last
			}
		}
		g.dirty = true
	}
	g.dataMaybe = len(recs) == batch
	g.dispatch(time.Now())
	return g.dataMaybe && len(g.fresh)-g.freshHead < batch
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

// peekReady returns the next record to deliver: the lowest seq of the
// fresh queue and the retry heap.
func (g *group) peekReady() (e *entry, retry bool) {
	if r := g.retry.peek(); r != nil {
		e, retry = r, true
	}
	if g.freshHead < len(g.fresh) {
		if f := g.fresh[g.freshHead]; e == nil || f.d.Seq < e.d.Seq {
			return f, false
		}
	}
	return e, retry
}

func (g *group) popReady(retry bool) {
	if retry {
		g.retry.pop()
		g.nHeld--
		return
	}
	g.fresh[g.freshHead] = nil
	g.freshHead++
	if g.freshHead == len(g.fresh) {
		g.fresh, g.freshHead = g.fresh[:0], 0
	}
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

func (g *group) dispatchReady(now time.Time) {
	for {
		e, retry := g.peekReady()
		if e == nil || len(g.subs) == 0 {
			return
		}
		if !retry && g.nInflight+g.nHeld >= g.maxInFlight {
			return
		}
		if now.After(e.part.leaseUntil) {
			return
		}
		s, accepted := g.pick(e)
		if !accepted {
			g.popReady(retry)
			g.settle(e)
			continue
		}
		if s == nil {
			return
		}
		g.popReady(retry)
		g.deliver(e, s, now)
	}
}

// pick returns a subscription with room that accepts e, round robin, and
// whether any subscription accepts e at all.
func (g *group) pick(e *entry) (*Subscription, bool) {
	accepted := !g.hasFilter
	n := len(g.subs)
	for i := 0; i < n; i++ {
		s := g.subs[(g.rr+i)%n]
		if s.opts.Filter != nil && !s.opts.Filter(&e.d.Record) {
			continue
		}
		accepted = true
		if s.paused || s.closing || s.inflight >= s.opts.MaxInFlight {
			continue
		}
		g.rr = (g.rr + i + 1) % n
		return s, true
	}
	return nil, accepted
}

func (g *group) deliver(e *entry, s *Subscription, now time.Time) {
	e.attempt++
	e.gen++
	e.state = stInflight
	e.sub, e.opts = s, &s.opts
	e.deadline = now.Add(s.opts.AckTimeout)
	g.leases.push(e)
	if e.hidx == 0 {
		g.signal()
	}
	if e.attempt == 1 {
		g.unsettled[e.d.ID] = e
	}
	s.inflight++
	e.part.inflight++
	g.nInflight++
	g.b.obs.Delivered(g.topic, g.name, e.attempt)
	dc := DeliveryContext{Attempt: e.attempt, MaxAttempts: s.opts.MaxAttempts, Deadline: e.deadline}
	d := &e.d
	if e.gen == 1 {
		d.DeliveryContext = dc
	} else {
		d = &Delivery{Record: e.d.Record, DeliveryContext: dc, Group: g.name, g: g, e: e}
	}
	d.gen = e.gen
	s.batch = append(s.batch, d)
}

// endLease takes an in-flight entry off its lease.
func (g *group) endLease(e *entry) {
	g.leases.remove(e)
	e.sub.inflight--
	e.part.inflight--
	g.nInflight--
}

func (g *group) settle(e *entry) {
	e.state = stSettled
	delete(g.unsettled, e.d.ID)
	e.part.advance()
	g.markDirty()
}

// markDirty schedules a cursor commit.
func (g *group) markDirty() {
	if !g.dirty {
		g.dirty = true
		g.signal()
	}
}

// drop gives e up without settling it: the cursor stays below it.
func (g *group) drop(e *entry) {
	e.state = stDropped
	delete(g.unsettled, e.d.ID)
	if s := e.d.Seq - 1; s < e.part.stopAt {
		e.part.stopAt = s
	}
	e.part.advance()
}

// fail handles a nack or an expired lease: redeliver after a backoff, or
// dead-letter after the last attempt.
func (g *group) fail(e *entry, reason string, now time.Time) {
	e.reason = reason
	switch {
	case e.part.draining:
		g.drop(e)
	case e.attempt >= e.opts.MaxAttempts:
		g.toDLQ(e, now)
	default:
		e.state = stWaiting
		e.deadline = now.Add(e.opts.backoff(e.attempt))
		g.waiting.push(e)
		g.nHeld++
		if e.hidx == 0 {
			g.signal() // the loop's timer must see the earlier deadline
		}
	}
}

// leased returns the in-flight entry of id if attempt is its current one.
func (g *group) leased(id string, attempt int) (*entry, error) {
	if attempt < 1 {
		return nil, invalid("attempt", "%d, want at least 1", attempt)
	}
	e := g.unsettled[id]
	if e == nil {
		return nil, fmt.Errorf("%w: id %q in group %q on %q", ErrNotInFlight, id, g.name, g.topic)
	}
	if e.state != stInflight || e.attempt != attempt {
		return nil, fmt.Errorf("%w: id %q attempt %d (now at attempt %d)", ErrStaleAck, id, attempt, e.attempt)
	}
	return e, nil
}

// currentEntry returns the in-flight entry of d if d's attempt is its current
// one, without a lookup by id.
func (g *group) currentEntry(d *Delivery) (*entry, error) {
	if e := d.e; e != nil {
		if e.state == stInflight && e.gen == d.gen {
			return e, nil
		}
		if e.state == stSettled || e.state == stDropped {
			return nil, fmt.Errorf("%w: id %q in group %q on %q", ErrNotInFlight, d.ID, g.name, g.topic)
		}
		return nil, fmt.Errorf("%w: id %q attempt %d (now at attempt %d)", ErrStaleAck, d.ID, d.Attempt, e.attempt)
	}
	return g.leased(d.ID, d.Attempt)
}

func (g *group) ack(id string, attempt int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, err := g.leased(id, attempt)
	if err != nil {
		return err
	}
	g.ackEntry(e)
	return nil
}

func (g *group) ackDelivery(d *Delivery) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, err := g.currentEntry(d)
	if err != nil {
		return err
	}
	g.ackEntry(e)
	return nil
}

func (g *group) ackEntry(e *entry) {
	g.endLease(e)
	g.settle(e)
	now := time.Now()
	g.b.obs.Acked(g.topic, g.name, now.Sub(time.UnixMilli(e.d.TS)))
	g.released(now)
}

func (g *group) nack(id string, attempt int, reason string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, err := g.leased(id, attempt)
	if err != nil {
		return err
	}
	g.endLease(e)
	g.b.obs.Nacked(g.topic, g.name)
	if reason == "" {
		reason = "nacked"
	}
	now := time.Now()
	g.fail(e, reason, now)
	g.released(now)
	return nil
}

func (g *group) deadLetterNow(id string, attempt int, reason string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, err := g.leased(id, attempt)
	if err != nil {
		return err
	}
	g.endLease(e)
	e.reason = reason
	g.toDLQ(e, time.Now())
	return nil
}

// toDLQ queues e for the dead-letter topic; the loop publishes it.
func (g *group) toDLQ(e *entry, now time.Time) {
	e.state = stDLQ
	e.deadline = now
	g.dlq = append(g.dlq, e)
	g.nHeld++
	g.signal()
}

func (g *group) modAck(id string, attempt int, extend time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, err := g.leased(id, attempt)
	if err != nil {
		return err
	}
	e.deadline = time.Now().Add(extend)
	g.leases.fix(e)
	g.signal()
	return nil
}

// released runs after a lease ended: deliver more, and read more if the
// buffer runs low.
func (g *group) released(now time.Time) {
	g.dispatch(now)
	if g.dataMaybe && len(g.fresh)-g.freshHead < g.b.cfg.ReadBatch/2 {
		g.signal()
	}
}

// expire ends the leases that ran out and moves due retries to the ready heap.
func (g *group) expire(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for e := g.leases.peek(); e != nil && !e.deadline.After(now); e = g.leases.peek() {
		if e.started.Load() != e.gen {
			// It waited in its subscription's queue all along: no handler
			// saw it, so this is no attempt. While the subscription's
			// handlers make progress it keeps its place in the queue;
			// otherwise it goes back to the group, for a subscription with
			// room.
			s := e.sub
			if !s.paused && !s.closing && now.Sub(time.Unix(0, s.lastStart.Load())) < s.opts.AckTimeout {
				e.deadline = now.Add(s.opts.AckTimeout)
				g.leases.fix(e)
				continue
			}
			g.endLease(e)
			e.attempt--
			e.state = stRetry
			g.retry.push(e)
			g.nHeld++
			continue
		}
		// The lease counts from when the handler started.
		if end := time.Unix(0, e.startedAt.Load()).Add(e.opts.AckTimeout); end.After(now) {
			e.deadline = end
			g.leases.fix(e)
			continue
		}
		g.endLease(e)
		g.b.obs.Expired(g.topic, g.name)
		g.fail(e, "ack deadline exceeded", now)
	}
	for e := g.waiting.peek(); e != nil && !e.deadline.After(now); e = g.waiting.peek() {
		g.waiting.pop()
		e.state = stRetry
		g.retry.push(e)
	}
	g.dispatch(now)
}

// Dead-letter headers set on records moved to the dead-letter topic.
const (
	HeaderDLQReason  = "x-dlq-reason"
	HeaderDLQAttempt = "x-dlq-attempts"
	HeaderDLQTopic   = "x-dlq-topic"
	HeaderDLQGroup   = "x-dlq-group"
	HeaderDLQID      = "x-dlq-id"
	HeaderDLQSeq     = "x-dlq-seq"
)

var dlqNamespace = uuid.MustParse("6f1c7b52-2f7e-4d0c-9a55-5c4c1e7e9a10")

func (g *group) deadLetter(ctx context.Context, now time.Time) {
	g.mu.Lock()
	var due []*entry
	keep := g.dlq[:0]
	for _, e := range g.dlq {
		if e.deadline.After(now) {
			keep = append(keep, e)
		} else {
			due = append(due, e)
		}
	}
	clear(g.dlq[len(keep):])
	g.dlq = keep
	g.mu.Unlock()
	for _, e := range due {
		err := g.publishDLQ(ctx, e)
		g.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				g.b.log.Warn("event: dead-letter failed", "topic", g.topic, "group", g.name, "id", e.d.ID, "err", err)
			}
			e.deadline = now.Add(time.Second)
			g.dlq = append(g.dlq, e)
		} else if e.state == stDLQ {
			g.nHeld--
			g.settle(e)
			g.b.obs.DeadLettered(g.topic, g.name)
			g.dispatch(time.Now())
		}
		g.mu.Unlock()
	}
}

func (g *group) publishDLQ(ctx context.Context, e *entry) error {
	r := e.d.Record
	h := make(map[string]string, len(r.Headers)+6)
	for k, v := range r.Headers {
		h[k] = v
	}
	h[HeaderDLQReason] = e.reason
	h[HeaderDLQAttempt] = strconv.Itoa(e.attempt)
	h[HeaderDLQTopic] = g.topic
	h[HeaderDLQGroup] = g.name
	h[HeaderDLQID] = r.ID
	h[HeaderDLQSeq] = strconv.FormatUint(r.Seq, 10)
	id := uuid.NewSHA1(dlqNamespace, []byte(g.topic+"\x00"+g.name+"\x00"+r.ID)).String()
	d := Record{
		ID: id, TS: time.Now().UnixMilli(), Topic: e.opts.DeadLetterTopic, Key: r.Key,
		Headers: h, Payload: r.Payload, CausedBy: []string{r.ID}, Tags: r.Tags, SID: r.SID,
	}
	d.Partition = PartitionOf(d.Key, d.ID, g.b.cfg.Partitions)
	_, err := g.b.Append(ctx, d.Topic, []Record{d})
	return err
}

// commit writes the settled prefix of each owned partition.
func (g *group) commit(ctx context.Context) {
	type pc struct {
		p   *partState
		seq uint64
	}
	g.mu.Lock()
	var todo []pc
	for _, p := range g.parts {
		if c := p.candidate(); c > p.committed {
			todo = append(todo, pc{p, c})
		}
	}
	g.dirty = false
	g.mu.Unlock()
	for _, t := range todo {
		err := g.b.cfg.Cursors.CommitCursor(ctx, g.topic, g.name, t.p.id, t.seq)
		g.mu.Lock()
		if err != nil {
			g.dirty = true
			if ctx.Err() == nil {
				g.b.log.Warn("event: commit failed", "topic", g.topic, "group", g.name, "partition", t.p.id, "err", err)
			}
		} else if t.seq > t.p.committed {
			t.p.committed = t.seq
			g.b.obs.Committed(g.topic, g.name, t.p.id, t.seq)
		}
		g.mu.Unlock()
	}
}

// syncLeases renews membership, takes this member's share of partitions
// and hands over the ones it should no longer own.
func (g *group) syncLeases(ctx context.Context) {
	cfg := &g.b.cfg
	t0 := time.Now()
	members, err := cfg.Leases.Heartbeat(ctx, g.topic, g.name, g.member, cfg.LeaseTTL)
	if err != nil {
		if ctx.Err() == nil {
			g.b.log.Warn("event: group heartbeat failed", "topic", g.topic, "group", g.name, "err", err)
		}
		return
	}
	idx, k := slices.Index(members, g.member), len(members)
	if idx < 0 {
		idx, k = 0, 1
	}
	g.mu.Lock()
	stopping := g.stopping
	g.mu.Unlock()
	for p := 0; p < cfg.Partitions; p++ {
		want := p%k == idx && !stopping
		g.mu.Lock()
		ps := g.parts[p]
		if ps != nil && !want && !ps.draining {
			g.startDrain(ps)
		}
		g.mu.Unlock()
		if ps == nil && !want {
			continue
		}
		ok, err := cfg.Leases.AcquireLease(ctx, g.topic, g.name, p, g.member, cfg.LeaseTTL)
		if err != nil {
			if ctx.Err() == nil {
				g.b.log.Warn("event: lease failed", "topic", g.topic, "group", g.name, "partition", p, "err", err)
			}
			continue
		}
		switch {
		case !ok && ps != nil:
			g.b.log.Warn("event: partition lease lost", "topic", g.topic, "group", g.name, "partition", p)
			g.mu.Lock()
			g.startDrain(ps)
			g.dropInflight(ps)
			g.mu.Unlock()
			g.handOver(ctx, ps, false)
		case ok && ps == nil:
			if err := g.addPart(ctx, p, t0.Add(cfg.LeaseTTL)); err != nil {
				g.b.log.Warn("event: take partition failed", "topic", g.topic, "group", g.name, "partition", p, "err", err)
				_ = cfg.Leases.ReleaseLease(ctx, g.topic, g.name, p, g.member)
			}
		case ok:
			g.mu.Lock()
			ps.leaseUntil = t0.Add(cfg.LeaseTTL)
			done := ps.draining && ps.inflight == 0
			g.dispatch(time.Now())
			g.mu.Unlock()
			if done {
				g.handOver(ctx, ps, true)
			}
		}
	}
}

func (g *group) addPart(ctx context.Context, p int, until time.Time) error {
	cur, err := g.b.cfg.Cursors.Cursors(ctx, g.topic, g.name)
	if err != nil {
		return err
	}
	seq, ok := cur[p]
	if !ok {
		seq = g.startSeq
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.parts[p] = &partState{id: p, readPos: seq, committed: seq, leaseUntil: until, stopAt: math.MaxUint64}
	g.dataMaybe = true
	return nil
}

// startDrain stops delivering a partition and gives up what was read of it
// but is not in flight.
func (g *group) startDrain(p *partState) {
	p.draining = true
	keep := g.fresh[:g.freshHead]
	for _, e := range g.fresh[g.freshHead:] {
		if e.part == p {
			g.drop(e)
		} else {
			keep = append(keep, e)
		}
	}
	clear(g.fresh[len(keep):])
	g.fresh = keep
	if g.freshHead == len(g.fresh) {
		g.fresh, g.freshHead = g.fresh[:0], 0
	}
	ofP := func(e *entry) bool { return e.part != p }
	for _, h := range []*entryHeap{&g.retry, &g.waiting} {
		for _, e := range h.filter(ofP) {
			g.nHeld--
			g.drop(e)
		}
	}
	keepDLQ := g.dlq[:0]
	for _, e := range g.dlq {
		if e.part == p {
			g.nHeld--
			g.drop(e)
		} else {
			keepDLQ = append(keepDLQ, e)
		}
	}
	clear(g.dlq[len(keepDLQ):])
	g.dlq = keepDLQ
}

// dropInflight gives up a partition's in-flight deliveries, whose acks will
// then be refused.
func (g *group) dropInflight(p *partState) {
	for _, e := range slices.Collect(func(yield func(*entry) bool) {
		for _, e := range g.unsettled {
			if e.part == p && e.state == stInflight && !yield(e) {
				return
			}
		}
	}) {
		g.endLease(e)
		g.drop(e)
	}
}

// handOver commits what is settled of a drained partition and releases it.
func (g *group) handOver(ctx context.Context, p *partState, release bool) {
	g.mu.Lock()
	c := p.candidate()
	delete(g.parts, p.id)
	g.mu.Unlock()
	if c > p.committed {
		if err := g.b.cfg.Cursors.CommitCursor(ctx, g.topic, g.name, p.id, c); err != nil {
			g.b.log.Warn("event: commit on hand-over failed", "topic", g.topic, "group", g.name, "partition", p.id, "err", err)
		}
	}
	if release {
		if err := g.b.cfg.Leases.ReleaseLease(ctx, g.topic, g.name, p.id, g.member); err != nil {
			g.b.log.Warn("event: release lease failed", "topic", g.topic, "group", g.name, "partition", p.id, "err", err)
		}
	}
}

func (g *group) addSub(s *Subscription) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.subs = append(g.subs, s)
	g.maxInFlight += s.opts.MaxInFlight
	g.hasFilter = g.hasFilter || s.opts.Filter != nil
	s.start()
	g.dispatch(time.Now())
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
	for _, e := range g.unsettled {
		if e.state == stInflight && e.sub == s {
			g.endLease(e)
			if e.part.draining {
				g.drop(e)
				continue
			}
			e.state = stRetry
			g.retry.push(e)
			g.nHeld++
		}
	}
	g.dispatch(time.Now())
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
		Topic: g.topic, Group: g.name, InFlight: g.nInflight, Waiting: g.nHeld,
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
