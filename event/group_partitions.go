package event

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// partState is a partition owned by this member.
//
// The cursor of a partition may pass only records this member read and
// settled, or found settled in the group state when it took the
// partition: the next owner starts after it. Two fields keep that:
// readPos moves only over records absorb turned into entries (or found
// settled), and a draining partition reads no more, its candidate held
// at or below the read position it had when it began to drain (stopAt).
type partState struct {
	id         int
	token      uint64   // of this member's lease on the partition (its Fence)
	readPos    uint64   // every record of the partition up to it was read into out
	committed  uint64   // highest seq committed to the CursorStore
	out        []*entry // read and not yet settled, in seq order, from head
	head       int
	inflight   int
	leaseUntil time.Time
	// leaseNs is leaseUntil in Unix ns, for the handler goroutines to read
	// without g.mu (see Subscription.work).
	leaseNs  atomic.Int64
	draining bool   // being handed over: no new deliveries
	stopAt   uint64 // while draining: the cursor never passes it
	gs       partGroupState
	// sub is the subscription the partition is assigned to (see assign),
	// holder the one its deliveries in flight went to.
	sub, holder *Subscription
}

// setLease records until when this member holds the partition, by its
// own clock: the lease counts from before the renewal that granted it.
// Called with g.mu held, or before the partition is shared.
func (p *partState) setLease(until time.Time) {
	p.leaseUntil = until
	p.leaseNs.Store(until.UnixNano())
}

// leaseEnded reports whether the member's lease on the partition has run
// out at now: it may have lost the partition to another member, so it
// neither delivers the partition's records nor settles them until it
// renews the lease. Safe without g.mu.
func (p *partState) leaseEnded(now time.Time) bool {
	return now.UnixNano() > p.leaseNs.Load()
}

// candidate is the seq the cursor may be committed to: the highest seq at
// and below which every record of the partition was read by this member
// and settled (see partState).
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

// commit writes the settled prefix of each owned partition.
func (g *group) commit(ctx context.Context) {
	type pc struct {
		p   *partState
		seq uint64
	}
	g.mu.Lock()
	g.dirty = false // before the state is collected: a settle from now on marks it again
	g.mu.Unlock()
	g.saveState(ctx)
	g.mu.Lock()
	var todo []pc
	for _, p := range g.parts {
		if c := p.candidate(); c > p.committed {
			todo = append(todo, pc{p, c})
		}
	}
	g.mu.Unlock()
	for _, t := range todo {
		err := g.b.cfg.Cursors.CommitCursor(ctx, g.partRef(t.p.id), t.seq, g.fence(t.p))
		g.mu.Lock()
		if err != nil {
			g.dirty = true
			g.leaseDoubt(err)
			if ctx.Err() == nil {
				g.b.log.Warn("event: commit failed", "topic", g.topic, "group", g.name, "partition", t.p.id, "err", err)
			}
		} else if t.seq > t.p.committed {
			t.p.committed = t.seq
			g.b.obs.Committed(g.topic, g.name, t.p.id, t.seq)
			if t.p.gs.hasBelow(t.seq) {
				g.dirty = true // forget it next time
			}
		}
		g.mu.Unlock()
	}
}

// syncLeases renews membership, takes this member's share of partitions
// and hands over the ones it should no longer own.
//
// Over a [LeaseRenewer] the membership and the leases of the partitions
// the member holds are renewed in one call (one write, the only one of a
// member whose partitions do not change); AcquireLease is then called
// only for the partitions it wants and does not hold. Otherwise the
// heartbeat and each lease are a call of their own.
func (g *group) syncLeases(ctx context.Context) {
	cfg := &g.b.cfg
	t0 := g.b.clk.Now()
	members, renewed, err := g.renew(ctx)
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
	n, err := g.b.refreshPartitions(ctx, g.topic)
	if err != nil {
		if ctx.Err() == nil {
			g.b.log.Warn("event: read topic settings failed", "topic", g.topic, "group", g.name, "err", err)
		}
		n, _ = g.b.partitionsOf(ctx, g.topic) // as known: still renew what it holds
	}
	g.refreshConfig(ctx)
	for p := 0; p < n; p++ {
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
		var tok uint64
		var ok bool
		if r, found := renewed[p]; found && r.ps == ps {
			// Renewed with the membership, and still the holding it was
			// then (not handed over and taken again since).
			tok, ok = r.Token, r.Held
		} else {
			tok, ok, err = cfg.Leases.AcquireLease(ctx, g.partRef(p), g.member, cfg.LeaseTTL)
			if err != nil {
				if ctx.Err() == nil {
					g.b.log.Warn("event: lease failed", "topic", g.topic, "group", g.name, "partition", p, "err", err)
				}
				continue
			}
		}
		if ok && ps != nil && tok != ps.token {
			// Another member held the partition since this one last
			// renewed (it stalled past its lease): what it knows of the
			// partition is stale. Give it up and take it afresh.
			g.b.log.Warn("event: partition lease lost and taken again", "topic", g.topic, "group", g.name, "partition", p)
			g.lose(ctx, ps)
			ps = nil
			if !want {
				_ = cfg.Leases.ReleaseLease(ctx, g.partRef(p), g.member)
				continue
			}
		}
		switch {
		case !ok && ps != nil:
			g.b.log.Warn("event: partition lease lost", "topic", g.topic, "group", g.name, "partition", p)
			g.lose(ctx, ps)
		case ok && ps == nil:
			if err := g.addPart(ctx, p, tok, t0.Add(cfg.LeaseTTL)); err != nil {
				g.b.log.Warn("event: take partition failed", "topic", g.topic, "group", g.name, "partition", p, "err", err)
				_ = cfg.Leases.ReleaseLease(ctx, g.partRef(p), g.member)
			}
		case ok:
			g.mu.Lock()
			ps.setLease(t0.Add(cfg.LeaseTTL))
			done := ps.draining && ps.inflight == 0
			g.dispatch(g.b.clk.Now())
			g.mu.Unlock()
			if done {
				g.handOver(ctx, ps, true)
			}
		}
	}
}

// renewal is the answer of a [LeaseRenewer] for a partition the member
// held when it renewed: ps is the partition's state then.
type renewal struct {
	LeaseGrant
	ps *partState
}

// renew heartbeats the member. Over a [LeaseRenewer] it renews the leases
// of the partitions the member holds in the same call, and returns their
// grants by partition; otherwise it returns none, and syncLeases renews
// each lease.
func (g *group) renew(ctx context.Context) ([]string, map[int]renewal, error) {
	cfg := &g.b.cfg
	r, ok := cfg.Leases.(LeaseRenewer)
	if !ok {
		members, err := cfg.Leases.Heartbeat(ctx, g.topic, g.name, g.member, cfg.LeaseTTL)
		return members, nil, err
	}
	g.mu.Lock()
	held := make(map[int]*partState, len(g.parts))
	parts := make([]int, 0, len(g.parts))
	for p, ps := range g.parts {
		held[p] = ps
		parts = append(parts, p)
	}
	g.mu.Unlock()
	slices.Sort(parts)
	members, grants, err := r.Renew(ctx, g.topic, g.name, g.member, cfg.LeaseTTL, parts)
	if err != nil {
		return nil, nil, err
	}
	if len(grants) != len(parts) {
		return nil, nil, fmt.Errorf("event: lease store renewed %d partitions, asked %d", len(grants), len(parts))
	}
	out := make(map[int]renewal, len(grants))
	for i, gr := range grants {
		if gr.Partition != parts[i] {
			return nil, nil, fmt.Errorf("event: lease store renewed partition %d in place of %d", gr.Partition, parts[i])
		}
		out[gr.Partition] = renewal{LeaseGrant: gr, ps: held[gr.Partition]}
	}
	return members, out, nil
}

func (g *group) addPart(ctx context.Context, p int, token uint64, until time.Time) error {
	cur, err := g.b.cfg.Cursors.Cursors(ctx, g.topic, g.name)
	if err != nil {
		return err
	}
	seq, ok := cur[p]
	if !ok {
		seq = g.startSeq
	}
	ps := &partState{id: p, token: token, readPos: seq, committed: seq, stopAt: math.MaxUint64}
	ps.setLease(until)
	if err := g.loadState(ctx, ps); err != nil {
		return err
	}
	if ps.leaseEnded(g.b.clk.Now()) {
		// Reading the cursor and the state took the whole lease (a slow or
		// failing store): another member may hold the partition already,
		// and OnAssign must not run beside its.
		return errors.New("the lease ran out while the partition's cursor and state were read")
	}
	g.callHooks(ctx, p, true) // before the partition can deliver
	g.mu.Lock()
	defer g.mu.Unlock()
	g.parts[p] = ps
	g.assign()
	g.dataMaybe = true
	if ps.gs.hasBelow(seq) {
		g.markDirty()
	}
	return nil
}

// startDrain stops delivering a partition and gives up what was read of it
// but is not in flight.
func (g *group) startDrain(p *partState) {
	g.collectState(p) // what is settled above the cursor, before it is popped
	p.draining = true
	p.stopAt = min(p.stopAt, p.readPos) // nothing read from now on counts
	if g.keyOrdered {
		g.dropKeys(p)
	}
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
	var es []*entry
	for _, e := range p.out[p.head:] {
		if e.state == stInflight {
			es = append(es, e)
		}
	}
	for _, e := range es { // drop pops p.out
		g.endLease(e)
		g.drop(e)
	}
}

// handOver commits what is settled of a drained partition and releases it.
func (g *group) handOver(ctx context.Context, p *partState, release bool) {
	g.mu.Lock()
	c := p.candidate()
	delete(g.parts, p.id)
	g.collectState(p)
	g.assign()
	g.dispatch(g.b.clk.Now())
	g.mu.Unlock()
	g.flushState(ctx, p)
	if c > p.committed {
		if err := g.b.cfg.Cursors.CommitCursor(ctx, g.partRef(p.id), c, g.fence(p)); err != nil {
			g.b.log.Warn("event: commit on hand-over failed", "topic", g.topic, "group", g.name, "partition", p.id, "err", err)
		} else {
			p.committed = c
			g.flushState(ctx, p) // forget what the cursor passed
		}
	}
	g.callHooks(ctx, p.id, false) // settled or handed back, still leased
	if release {
		if err := g.b.cfg.Leases.ReleaseLease(ctx, g.partRef(p.id), g.member); err != nil {
			g.b.log.Warn("event: release lease failed", "topic", g.topic, "group", g.name, "partition", p.id, "err", err)
		}
	}
}

// lose gives up partition p without writing anything of it: this member
// no longer holds its lease, so its cursor and state belong to another.
// Its deliveries in flight are dropped (their acks are refused) and the
// rebalance hooks are told.
func (g *group) lose(ctx context.Context, p *partState) {
	g.mu.Lock()
	g.startDrain(p)
	g.dropInflight(p)
	delete(g.parts, p.id)
	g.assign()
	g.dispatch(g.b.clk.Now())
	g.mu.Unlock()
	g.callHooks(ctx, p.id, false)
}

// fence is the fence of this member's writes to partition p.
func (g *group) fence(p *partState) Fence {
	return Fence{Member: g.member, Token: p.token}
}

// leaseDoubt makes the run loop renew the leases at once after a write
// was refused for its fence: the member either still holds the partition
// (its lease ran out and nobody took it) or gives it up. Called with g.mu
// held or not.
func (g *group) leaseDoubt(err error) {
	if errors.Is(err, ErrLeaseLost) {
		g.resync.Store(true)
		g.signal()
	}
}

// partRef names partition p of the group.
func (g *group) partRef(p int) PartitionRef {
	return PartitionRef{Topic: g.topic, Group: g.name, Partition: p}
}

// addHooks keeps the rebalance hooks of o, if it has any. Called with mu
// held, or before the group runs.
func (g *group) addHooks(o *SubscribeOptions) {
	if o.OnAssign != nil || o.OnRevoke != nil {
		g.hooks = append(g.hooks, SubscribeOptions{OnAssign: o.OnAssign, OnRevoke: o.OnRevoke})
	}
}

// callHooks calls the OnAssign (assign) or OnRevoke hooks of partition p.
func (g *group) callHooks(ctx context.Context, p int, assign bool) {
	g.mu.Lock()
	hooks := g.hooks
	g.mu.Unlock()
	for _, h := range hooks {
		switch {
		case assign && h.OnAssign != nil:
			h.OnAssign(ctx, p)
		case !assign && h.OnRevoke != nil:
			h.OnRevoke(ctx, p)
		}
	}
}
