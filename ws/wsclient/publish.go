package wsclient

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/internal/wsframe"
)

// PublishFuture is the outcome of a [Client.PublishAsync], known once
// Done is closed.
type PublishFuture struct {
	done chan struct{}
	res  wsproto.Published
	err  error

	f *wsframe.Frame // to send (again)
	n uint64         // its place in the order of PublishAsync calls
}

// Done is closed when the outcome is known.
func (p *PublishFuture) Done() <-chan struct{} { return p.done }

// Get waits for the outcome: the stored event's id and seq, or why it was
// refused (an *[*wsproto.Error] for the server's ERR, [ErrClosed], or
// [ErrDisconnected] for a client that does not reconnect). When ctx ends
// first it returns ctx's error, and the publish goes on.
func (p *PublishFuture) Get(ctx context.Context) (wsproto.Published, error) {
	select {
	case <-p.done:
		return p.res, p.err
	default:
	}
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return wsproto.Published{}, ctx.Err()
	}
}

func failedFuture(err error) *PublishFuture {
	p := &PublishFuture{done: make(chan struct{}), err: err}
	close(p.done)
	return p
}

// asyncState is the Client's state of PublishAsync.
type asyncState struct {
	window chan struct{} // one token per publish not answered

	mu        sync.Mutex
	n         uint64           // PublishAsync calls so far
	pending   int              // not answered
	idle      chan struct{}    // closed when pending drops to 0; nil while 0
	resend    []*PublishFuture // cut off by a lost connection, to send in order
	resending bool             // resendLoop runs: new publishes queue behind
}

// PublishAsync publishes as [Client.Publish] does, without waiting for the
// answer: it sends the PUBLISH frame and returns its future at once, so
// that one goroutine keeps up to Options.PublishWindow publishes in flight
// (it waits only while the window is full, or ctx ends first). ctx bounds
// that wait only; use [PublishFuture.Get] for the outcome, and
// [Client.Flush] to wait for all.
//
// The publishes of one goroutine are stored in the order of its calls: the
// gateway stores a connection's PUBLISH frames in order and answers in
// order, and publishes cut off by a lost connection are sent again, in
// their order and before later ones, once the client has reconnected
// (their ids make the repeat harmless). payload must not be changed until
// the future is done.
func (c *Client) PublishAsync(ctx context.Context, topic string, payload []byte, opts ...event.PublishOption) *PublishFuture {
	f, err := publishFrame(topic, payload, opts)
	if err != nil {
		return failedFuture(err)
	}
	if c.ctx.Err() != nil {
		return failedFuture(ErrClosed)
	}
	a := &c.async
	select {
	case a.window <- struct{}{}:
	default:
		select {
		case a.window <- struct{}{}:
		case <-ctx.Done():
			return failedFuture(ctx.Err())
		case <-c.ctx.Done():
			return failedFuture(ErrClosed)
		}
	}
	p := &PublishFuture{done: make(chan struct{}), f: f}
	a.mu.Lock()
	a.n++
	p.n = a.n
	if a.pending++; a.pending == 1 {
		a.idle = make(chan struct{})
	}
	if a.resending {
		a.resend = append(a.resend, p)
		a.mu.Unlock()
		return p
	}
	// Read under a.mu: a connection that replaced a lost one is current
	// only after the lost one's publishes are in line (resending).
	c.mu.Lock()
	cc := c.cur
	c.mu.Unlock()
	a.mu.Unlock()
	if cc == nil {
		c.publishLost(p, nil)
		return p
	}
	c.sendPublish(cc, p)
	return p
}

// Flush waits until no publish of [Client.PublishAsync] is waiting for its
// answer, or ctx ends.
func (c *Client) Flush(ctx context.Context) error {
	a := &c.async
	a.mu.Lock()
	idle := a.idle
	a.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendPublish sends p on cc; its answer finishes it, the loss of cc puts
// it back in line to send again. It reports false when cc was lost
// before p could be sent.
func (c *Client) sendPublish(cc *clientConn, p *PublishFuture) bool {
	return cc.sendOwned(p.f, func(sf *wsframe.ServerFrame, err error) {
		switch {
		case err != nil:
			c.publishLost(p, cc)
		case sf.Err() != nil:
			c.finishPublish(p, wsproto.Published{}, sf.Err())
		default:
			c.finishPublish(p, wsproto.Published{ID: sf.ID, Seq: sf.Seq}, nil)
		}
	})
}

func (c *Client) finishPublish(p *PublishFuture, res wsproto.Published, err error) {
	p.res, p.err, p.f = res, err, nil
	close(p.done)
	a := &c.async
	<-a.window
	a.mu.Lock()
	if a.pending--; a.pending == 0 {
		close(a.idle)
		a.idle = nil
	}
	a.mu.Unlock()
}

// publishLost puts p, cut off by the loss of cc (nil: no connection), in
// line to be sent again once the client has reconnected; a client that is
// closed or does not reconnect finishes it with the reason. It must not
// block: it runs on the reader goroutine.
func (c *Client) publishLost(p *PublishFuture, cc *clientConn) {
	c.mu.Lock()
	closed, lost, lostErr := c.closed, c.lost, c.lostErr
	c.mu.Unlock()
	switch {
	case closed:
		c.finishPublish(p, wsproto.Published{}, ErrClosed)
		return
	case c.opts.DisableReconnect:
		if !lost && cc != nil {
			lostErr = disconnected(cc.closeError())
		} else if lostErr == nil {
			lostErr = ErrDisconnected
		}
		c.finishPublish(p, wsproto.Published{}, lostErr)
		return
	}
	a := &c.async
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resend = append(a.resend, p)
	if !a.resending {
		a.resending = true
		c.wg.Add(1)
		go c.resendLoop()
	}
}

// resendLoop sends the publishes in line, in the order of their
// PublishAsync calls, on the next live connection, until the line is
// empty.
func (c *Client) resendLoop() {
	defer c.wg.Done()
	a := &c.async
	for {
		cc, err := c.conn(c.ctx)
		a.mu.Lock()
		batch := a.resend
		a.resend = nil
		if len(batch) == 0 || err != nil {
			a.resending = false
			a.mu.Unlock()
			for _, p := range batch {
				c.finishPublish(p, wsproto.Published{}, err)
			}
			return
		}
		a.mu.Unlock()
		slices.SortFunc(batch, func(x, y *PublishFuture) int { return cmp.Compare(x.n, y.n) })
		for i, p := range batch {
			if !c.sendPublish(cc, p) {
				// cc was lost: p is in line again (publishLost), and so
				// are those sent before it, as their answers fail. Put
				// the rest back too and wait for the next connection.
				a.mu.Lock()
				a.resend = append(a.resend, batch[i+1:]...)
				a.mu.Unlock()
				break
			}
		}
	}
}
