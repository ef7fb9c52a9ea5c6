package main

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// injectFaults injects faults for o.Duration, one every o.FaultEvery on
// average (uniformly 0.5 to 1.5 times it), each of a kind and on a target
// drawn from the run's seeded generator. It returns when the duration is
// over; stalled children resume and killed ones restart after it (see
// waitPending).
func (h *harness) injectFaults(ctx context.Context) error {
	end := time.Now().Add(h.o.Duration)
	if len(h.kinds) == 0 {
		sleepCtx(ctx, h.o.Duration)
		return ctx.Err()
	}
	for {
		gap := time.Duration((0.5 + h.rng.Float64()) * float64(h.o.FaultEvery))
		next := time.Now().Add(gap)
		if next.After(end) {
			sleepCtx(ctx, time.Until(end))
			return ctx.Err()
		}
		sleepCtx(ctx, gap)
		if err := ctx.Err(); err != nil {
			return err
		}
		h.mu.Lock()
		fatal := h.fatal
		h.mu.Unlock()
		if fatal != nil {
			return fatal
		}
		h.inject(ctx, h.kinds[h.rng.IntN(len(h.kinds))])
	}
}

// eligible returns the slots a fault of kind may hit now: running and
// not stalled, and for a consumer that stalls or dies, not the last
// running one (so the group always has a member within a lease, and the
// run finishes).
func (h *harness) eligible(kind string) []*slot {
	h.mu.Lock()
	defer h.mu.Unlock()
	upConsumers := 0
	for _, sl := range h.slots {
		if sl.role == "consumer" && sl.up {
			upConsumers++
		}
	}
	var out []*slot
	for _, sl := range h.slots {
		if !sl.up {
			continue
		}
		if sl.role == "consumer" && (kind == faultKill || kind == faultStop) && upConsumers < 2 && h.o.Consumers > 1 {
			continue
		}
		if sl.role == "consumer" && kind == faultStop && h.o.Consumers == 1 {
			continue // a lone consumer is only killed, and back within a lease
		}
		out = append(out, sl)
	}
	return out
}

func (h *harness) addFault(f *Fault) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.mu.Unlock()
}

// inject injects one fault of kind.
func (h *harness) inject(ctx context.Context, kind string) {
	if kind == faultPGRestart {
		h.mu.Lock()
		busy := false
		for _, f := range h.faults {
			if f.Kind == faultPGRestart && f.Until == 0 {
				busy = true
			}
		}
		if busy {
			h.noTarget++
		}
		h.mu.Unlock()
		if busy {
			return
		}
		h.pgRestart(ctx)
		return
	}
	targets := h.eligible(kind)
	if len(targets) == 0 {
		h.mu.Lock()
		h.noTarget++
		h.mu.Unlock()
		return
	}
	sl := targets[h.rng.IntN(len(targets))]
	// Every draw is made here, whatever the fault, so that the schedule
	// of kinds and targets depends on the seed alone.
	frac := h.rng.Float64()
	coin := h.rng.IntN(2) == 0
	h.mu.Lock()
	p := sl.cur
	h.mu.Unlock()
	switch kind {
	case faultKill:
		var delay time.Duration
		if sl.role == "consumer" {
			delay = time.Duration(frac * float64(h.o.Lease)) // back within a lease
		} else {
			delay = time.Duration(frac * float64(500*time.Millisecond))
		}
		h.kill(ctx, p, delay, coin)
	case faultStop:
		h.stop(p, time.Duration((1.2+1.3*frac)*float64(h.o.Lease)))
	case faultPGTerm:
		h.terminate(ctx, p)
	}
}

// kill kills p with SIGKILL and starts the next incarnation after delay;
// a publisher's begins with the number p was publishing when republish is
// set (publishing is idempotent by id), with the next one otherwise (p's
// last record stays a "maybe").
func (h *harness) kill(ctx context.Context, p *proc, delay time.Duration, republish bool) {
	now := time.Now().UnixNano()
	h.mu.Lock()
	p.killed = true
	p.slot.up = false
	h.faults = append(h.faults, &Fault{Kind: faultKill, Target: p.member, proc: p, T: now, Until: now})
	h.pending++
	h.mu.Unlock()
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	h.logf("kill %s; restart in %v (republish %v)", p.member, delay.Round(time.Millisecond), republish)
	go func() {
		defer h.done()
		<-p.exited // its last lines read
		sleepCtx(ctx, delay)
		if ctx.Err() == nil {
			h.restart(p.slot, republish)
		}
	}()
}

// stop stalls p (SIGSTOP) for d, past its leases, then resumes it.
func (h *harness) stop(p *proc, d time.Duration) {
	f := &Fault{Kind: faultStop, Target: p.member, proc: p, T: time.Now().UnixNano()}
	h.mu.Lock()
	p.slot.up = false
	h.faults = append(h.faults, f)
	h.pending++
	h.mu.Unlock()
	_ = syscall.Kill(p.pid, syscall.SIGSTOP)
	h.logf("stop %s for %v", p.member, d.Round(time.Millisecond))
	go func() {
		defer h.done()
		time.Sleep(d)
		_ = syscall.Kill(p.pid, syscall.SIGCONT)
		h.mu.Lock()
		f.Until = time.Now().UnixNano()
		if p.slot.cur == p && !p.killed {
			p.slot.up = true
		}
		h.mu.Unlock()
	}()
}

// terminate ends p's PostgreSQL connections (pg_terminate_backend), found
// by their application_name.
func (h *harness) terminate(ctx context.Context, p *proc) {
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t := time.Now().UnixNano()
	n, err := terminateBackends(tctx, h.admin, h.appName(p.slot.name, p.inc))
	if err != nil {
		h.logf("pg_terminate_backend of %s failed: %v", p.member, err)
		h.mu.Lock()
		h.noTarget++
		h.mu.Unlock()
		return
	}
	h.addFault(&Fault{Kind: faultPGTerm, Target: p.member, proc: p, T: t, Until: time.Now().UnixNano(), N: n})
	h.logf("pg_terminate_backend of %s: %d connections", p.member, n)
}

// pgRestart restarts the PostgreSQL server as a crash would, in the
// background.
func (h *harness) pgRestart(ctx context.Context) {
	f := &Fault{Kind: faultPGRestart, T: time.Now().UnixNano()}
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.pending++
	h.mu.Unlock()
	h.logf("pg_ctl restart -m immediate")
	go func() {
		defer h.done()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		err := h.pg.restart(rctx)
		h.mu.Lock()
		f.Until = time.Now().UnixNano()
		h.mu.Unlock()
		if err != nil {
			h.setFatal(fmt.Errorf("restart PostgreSQL: %w", err))
			return
		}
		h.logf("PostgreSQL back after %v", time.Duration(f.Until-f.T).Round(time.Millisecond))
	}()
}
