package ws

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/clock"
)

// The keeper: one goroutine of the gateway, running while it has
// connections, keeps every connection's deadlines (the auth timeout, the
// token expiry, the next ping) in one heap and acts on them as they come
// due, so that an idle connection holds no timer and no goroutine of its
// own for them. What it starts (a ping, a close handshake) runs in a
// goroutine of the connection that ends when that is done.

// deadline kinds.
const (
	dueAuth   = iota // the auth timeout: close unless authenticated
	dueExpiry        // the principal's token expiry: close unless refreshed
	duePing          // the next ping
)

type deadline struct {
	at   time.Time
	c    *conn
	kind int
}

type deadlines []deadline

func (h deadlines) Len() int           { return len(h) }
func (h deadlines) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlines) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlines) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlines) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = deadline{}
	*h = old[:len(old)-1]
	return d
}

// schedule adds a deadline of c, and starts the keeper if it does not run.
func (g *Gateway) schedule(c *conn, kind int, at time.Time) {
	g.kmu.Lock()
	defer g.kmu.Unlock()
	earliest := len(g.due) == 0 || at.Before(g.due[0].at)
	heap.Push(&g.due, deadline{at: at, c: c, kind: kind})
	if !g.keeping {
		g.keeping = true
		g.kwg.Add(1)
		go g.keep()
		return
	}
	if earliest {
		wakeUp(g.kwake)
	}
}

// connEnded tells the keeper that a connection ended; with none left it
// stops.
func (g *Gateway) connEnded() { wakeUp(g.kwake) }

func wakeUp(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (g *Gateway) keep() {
	defer g.kwg.Done()
	clk := g.cfg.Clock
	timer := clk.NewTimer(time.Hour)
	defer timer.Stop()
	busDone := g.bus.Done()
	var due []deadline
	for {
		g.kmu.Lock()
		if g.nconns.Load() == 0 {
			clear(g.due)
			g.due = g.due[:0]
			g.keeping = false
			g.kmu.Unlock()
			return
		}
		now := clk.Now()
		due = due[:0]
		for len(g.due) > 0 && !g.due[0].at.After(now) {
			due = append(due, heap.Pop(&g.due).(deadline))
		}
		wait := time.Hour
		if len(g.due) > 0 {
			wait = g.due[0].at.Sub(now)
		}
		g.kmu.Unlock()
		for _, d := range due {
			d.c.onDue(d.kind, now)
		}
		clear(due)
		if len(due) > 0 {
			continue // onDue may have scheduled what is due already
		}
		// Armed for the deadline's time, not for a duration from an
		// earlier reading: a fake clock may move in between.
		clock.ResetAt(clk, timer, now.Add(wait))
		select {
		case <-timer.C():
		case <-g.kwake:
			timer.Stop()
		case <-busDone:
			// Nothing more can be published or delivered here: say so,
			// rather than leave subscribers waiting in silence.
			busDone = nil
			timer.Stop()
			for _, c := range g.connsSnapshot() {
				c.spawn(func() { c.closeWith(wsproto.CloseGoingAway, "bus closed") })
			}
		}
	}
}

// onDue acts on a deadline of c that came due at now.
func (c *conn) onDue(kind int, now time.Time) {
	if c.ctx.Err() != nil {
		return // ended: its deadlines go with it
	}
	cfg := &c.g.cfg
	switch kind {
	case dueAuth:
		if c.principal.Load() == nil {
			c.spawn(func() {
				c.closeWith(wsproto.CloseAuthTimeout, fmt.Sprintf("unauthorized: no AUTH within %v", cfg.AuthTimeout))
			})
		}
	case dueExpiry:
		// A refreshing AUTH scheduled the new expiry; this one counts only
		// if the principal still expires by now.
		if p := c.principal.Load(); p != nil && p.Expired(now) {
			c.spawn(func() {
				c.closeWith(wsproto.CloseTokenExpired, "token_expired: the token expired and was not refreshed")
			})
		}
	case duePing:
		c.g.schedule(c, duePing, now.Add(cfg.PingInterval))
		if c.pinging.CompareAndSwap(false, true) {
			if !c.spawn(c.ping) {
				c.pinging.Store(false)
			}
		}
	}
}
