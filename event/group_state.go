package event

import (
	"context"
	"math"
)

// The state of a partition beyond its cursor (records settled out of
// order, attempts started) belongs to the group: it is kept in the
// GroupStateStore, read when a member takes the partition and written,
// coalesced, with the cursor commits (and before the cursor moves). Only
// what lies above the cursor is written: a record settled in order is
// covered by the cursor, and the state of a record the committed cursor
// has passed is forgotten.

// settledMark is the value of a settled seq in partGroupState's maps;
// other values are attempt counts.
const settledMark = math.MaxInt32

// partGroupState is what a member knows of the stored state of a partition
// it owns, and what it has yet to write.
type partGroupState struct {
	stored  map[uint64]int32 // as the store holds it, as far as this member knows
	pending map[uint64]int32 // to write
}

// load takes the state read from the store when the partition is taken.
func (s *partGroupState) load(st GroupState) {
	if len(st.Attempts)+len(st.Settled) == 0 {
		return
	}
	s.stored = make(map[uint64]int32, len(st.Attempts)+len(st.Settled))
	for seq, n := range st.Attempts {
		s.stored[seq] = int32(min(max(n, 0), settledMark-1))
	}
	for _, seq := range st.Settled {
		s.stored[seq] = settledMark
	}
}

// restored returns the attempts started of seq before this member took
// the partition, and whether seq is settled.
func (s *partGroupState) restored(seq uint64) (attempts int, settled bool) {
	if len(s.stored) == 0 {
		return 0, false
	}
	v := s.stored[seq]
	return int(v), v == settledMark
}

// note records that seq has state v (attempts started, or settledMark)
// unless the store or the pending writes have it already.
func (s *partGroupState) note(seq uint64, v int32) {
	if v <= 0 || s.stored[seq] >= v || s.pending[seq] >= v {
		return
	}
	if s.pending == nil {
		s.pending = make(map[uint64]int32)
	}
	s.pending[seq] = v
}

// hasBelow reports whether the store holds state of a seq at or below c.
func (s *partGroupState) hasBelow(c uint64) bool {
	for seq := range s.stored {
		if seq <= c {
			return true
		}
	}
	return false
}

// startedAttempts returns how many attempts of e reached a handler: a
// delivery waiting in its subscription's queue is not one yet.
func startedAttempts(e *entry) int32 {
	n := e.attempt
	if e.state == stInflight && e.started.Load() != e.gen {
		n--
	}
	return int32(n)
}

// collectState notes the state of p's window (what was read above the
// cursor) for the next write. Called with g.mu held.
func (g *group) collectState(p *partState) {
	for _, e := range p.out[p.head:] {
		switch e.state {
		case stFresh, stDropped: // nothing yet; noted when dropped
		case stSettled:
			p.gs.note(e.d.Seq, settledMark)
		default:
			p.gs.note(e.d.Seq, startedAttempts(e))
		}
	}
}

// saveState writes the state of every owned partition that changed.
func (g *group) saveState(ctx context.Context) {
	g.mu.Lock()
	parts := make([]*partState, 0, len(g.parts))
	for _, p := range g.parts {
		g.collectState(p)
		if len(p.gs.pending) > 0 || p.gs.hasBelow(p.committed) {
			parts = append(parts, p)
		}
	}
	g.mu.Unlock()
	for _, p := range parts {
		g.flushState(ctx, p)
	}
}

// flushState writes p's pending state above its settled prefix, and
// forgets the stored state the committed cursor has passed.
func (g *group) flushState(ctx context.Context, p *partState) {
	g.mu.Lock()
	c := p.candidate()
	var u GroupStateUpdate
	pending := p.gs.pending
	p.gs.pending = nil
	for seq, v := range pending {
		switch {
		case seq <= c: // the cursor will cover it
			delete(pending, seq)
		case v == settledMark:
			u.Settled = append(u.Settled, seq)
		default:
			if u.Attempts == nil {
				u.Attempts = make(map[uint64]int)
			}
			u.Attempts[seq] = int(v)
		}
	}
	for seq := range p.gs.stored {
		if seq <= p.committed {
			u.Forget = append(u.Forget, seq)
		}
	}
	g.mu.Unlock()
	if u.IsZero() {
		return
	}
	err := g.b.cfg.GroupState.UpdateGroupState(ctx, g.partRef(p.id), u, g.fence(p))
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		for seq, v := range pending {
			p.gs.note(seq, v)
		}
		g.dirty = true
		g.leaseDoubt(err)
		if ctx.Err() == nil {
			g.b.log.Warn("event: write group state failed", "topic", g.topic, "group", g.name, "partition", p.id, "err", err)
		}
		return
	}
	for _, seq := range u.Forget {
		delete(p.gs.stored, seq)
	}
	if len(pending) > 0 && p.gs.stored == nil {
		p.gs.stored = make(map[uint64]int32, len(pending))
	}
	for seq, v := range pending {
		p.gs.stored[seq] = max(p.gs.stored[seq], v)
	}
}

// loadState reads the stored state of partition p when it is taken.
func (g *group) loadState(ctx context.Context, p *partState) error {
	st, err := g.b.cfg.GroupState.GroupState(ctx, g.partRef(p.id))
	if err != nil {
		return err
	}
	p.gs.load(st)
	return nil
}
