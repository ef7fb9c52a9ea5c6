package wsclient

import (
	"context"
	"errors"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/internal/backoff"
)

// supervise watches the connection, pings it, and reconnects when it is
// lost.
func (c *Client) supervise(cc *clientConn) {
	defer c.wg.Done()
	var pingC <-chan time.Time
	var ping clock.Timer
	if c.opts.PingInterval > 0 {
		ping = c.opts.Clock.NewTimer(c.opts.PingInterval)
		defer ping.Stop()
		pingC = ping.C()
	}
	for {
		select {
		case <-c.ctx.Done():
			cc.close()
			return
		case <-pingC:
			ctx, cancel := context.WithTimeout(c.ctx, c.opts.PingInterval)
			if err := cc.ws.Ping(ctx); err != nil && c.ctx.Err() == nil {
				c.log.Debug("wsclient: ping failed", "url", c.url, "err", err)
				_ = cc.ws.CloseNow()
			}
			cancel()
			ping.Reset(c.opts.PingInterval)
			continue
		case <-cc.done:
		}
		c.mu.Lock()
		c.cur = nil
		if c.opts.DisableReconnect {
			c.lost = true
			c.lostErr = disconnected(cc.closeError())
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		if c.opts.DisableReconnect {
			c.log.Warn("wsclient: connection lost; not reconnecting", "url", c.url)
			// Its subscriptions end, with the reason (see Subscription.Err),
			// rather than wait in silence.
			for _, s := range c.subsSnapshot() {
				s.stop(disconnected(cc.closeError()))
			}
			for _, s := range c.liveSnapshot() {
				s.stop(disconnected(cc.closeError()))
			}
			return
		}
		next := c.reconnect()
		if next == nil {
			return // closed
		}
		cc = next
	}
}

// reconnect dials until it has a connection with every subscription
// restored, or the client is closed (nil).
func (c *Client) reconnect() *clientConn {
	// Half of each delay is random, so that clients cut off together do
	// not come back together.
	policy := backoff.Policy{Initial: c.opts.MinBackoff, Max: c.opts.MaxBackoff, Jitter: 0.5}
	for attempt := 1; ; attempt++ {
		t := c.opts.Clock.NewTimer(policy.Delay(attempt))
		select {
		case <-c.ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		cc, err := c.connect(c.ctx)
		if err != nil {
			if c.ctx.Err() != nil {
				return nil
			}
			c.log.Warn("wsclient: reconnect failed", "url", c.url, "attempt", attempt, "err", err)
			continue
		}
		if err := c.resubscribe(cc); err != nil {
			cc.close()
			if c.ctx.Err() != nil {
				return nil
			}
			c.log.Warn("wsclient: resubscribe failed", "url", c.url, "attempt", attempt, "err", err)
			continue
		}
		c.log.Info("wsclient: reconnected", "url", c.url, "attempt", attempt)
		c.setConn(cc)
		return cc
	}
}

// resubscribe subscribes every subscription again on cc (and pauses the
// paused ones; live ones resume from their Position). A subscription the
// server now refuses ends with that error.
func (c *Client) resubscribe(cc *clientConn) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.DialTimeout)
	defer cancel()
	if err := c.resubscribeLive(ctx, cc); err != nil {
		return err
	}
	for _, s := range c.subsSnapshot() {
		_, err := cc.call(ctx, s.frame(wsproto.OpSubscribe))
		var pe *wsproto.Error
		switch {
		case errors.As(err, &pe) && pe.Code != wsproto.CodeAlreadySubscribed:
			c.log.Warn("wsclient: subscription refused after reconnect", "topic", s.topic, "group", s.group, "err", err)
			s.end(err)
			continue
		case err != nil && pe == nil:
			return err
		}
		if s.isPaused() {
			if _, err := cc.call(ctx, s.frame(wsproto.OpPause)); err != nil && !errors.As(err, &pe) {
				return err
			}
		}
	}
	return nil
}

func (c *Client) subsSnapshot() []*Subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Subscription, 0, len(c.subs))
	for _, s := range c.subs {
		out = append(out, s)
	}
	return out
}
