package wsclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/ws/internal/cork"
	"github.com/promethean/promlib/ws/internal/wsframe"
)

// clientConn is one WebSocket connection of a Client.
type clientConn struct {
	c     *Client
	ws    *websocket.Conn
	cork  *cork.Conn // nil with a caller's HTTPClient
	gen   uint64
	done  chan struct{} // closed when the reader has stopped
	sendq chan []byte   // encoded frames for the writer

	mu       sync.Mutex
	pending  map[string]func(*wsframe.ServerFrame, error)
	dead     bool
	closeErr *CloseError // how the server closed it, if it did
}

// errLost is what a call on a connection that ended gets.
var errLost = errors.New("wsclient: connection lost")

// connect dials and authenticates a new connection.
func (c *Client) connect(ctx context.Context) (*clientConn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	c.mu.Lock()
	token := c.opts.Token // Auth may change it
	c.mu.Unlock()
	if c.opts.TokenFunc != nil {
		t, err := c.opts.TokenFunc(ctx)
		if err != nil {
			return nil, fmt.Errorf("wsclient: get token: %w", err)
		}
		token = t
	}
	c.mu.Lock()
	c.lastCork = nil
	c.mu.Unlock()
	ws, _, err := websocket.Dial(ctx, c.url, &websocket.DialOptions{HTTPHeader: c.opts.HTTPHeader, HTTPClient: c.opts.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("wsclient: dial %s: %w", c.url, err)
	}
	ws.SetReadLimit(c.opts.ReadLimit)
	cc := &clientConn{
		c: c, ws: ws, gen: c.gen.Add(1), done: make(chan struct{}), sendq: make(chan []byte, 256),
		pending: make(map[string]func(*wsframe.ServerFrame, error)),
	}
	c.mu.Lock()
	cc.cork, c.lastCork = c.lastCork, nil
	c.mu.Unlock()
	c.wg.Add(2)
	go cc.readLoop()
	go cc.writeLoop()
	if _, err := cc.call(ctx, &wsframe.Frame{Op: wsproto.OpAuth, Token: token}); err != nil {
		cc.close()
		return nil, err
	}
	return cc, nil
}

func (cc *clientConn) close() {
	_ = cc.ws.Close(websocket.StatusNormalClosure, "")
	<-cc.done
}

func (cc *clientConn) readLoop() {
	c := cc.c
	defer c.wg.Done()
	defer close(cc.done)
	for {
		_, data, err := cc.ws.Read(context.Background())
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				cc.mu.Lock()
				cc.closeErr = &CloseError{Code: int(ce.Code), Reason: ce.Reason}
				cc.mu.Unlock()
			}
			cc.fail()
			_ = cc.ws.CloseNow()
			switch {
			case c.ctx.Err() != nil:
			case ce.Code != 0 && ce.Code != websocket.StatusNormalClosure:
				c.log.Warn("wsclient: the server closed the connection", "url", c.url, "code", int(ce.Code), "reason", ce.Reason)
			default:
				c.log.Debug("wsclient: client connection lost", "url", c.url, "err", err)
			}
			return
		}
		f, err := wsframe.DecodeServer(data)
		if err != nil {
			c.log.Warn("wsclient: bad frame from server", "err", err)
			continue
		}
		switch f.Op {
		case wsproto.OpOK, wsproto.OpErr:
			switch cb := cc.take(f.Corr); {
			case cb != nil:
				cb(f, nil)
			case f.Op == wsproto.OpErr && f.Topic != "" && f.Group == "":
				c.liveEnded(f)
			case f.Op == wsproto.OpErr && f.Topic != "":
				c.subscriptionEnded(f)
			case f.Op == wsproto.OpErr:
				c.log.Warn("wsclient: server error", "code", f.Code, "msg", f.Msg)
			}
		case wsproto.OpEvent:
			if f.Group == "" {
				c.routeLive(cc, f)
				break
			}
			c.route(cc, f)
		case wsproto.OpGap:
			c.routeLive(cc, f)
		}
	}
}

// writeLoop writes queued frames, all that are queued at once in one
// system call.
func (cc *clientConn) writeLoop() {
	defer cc.c.wg.Done()
	for {
		select {
		case data := <-cc.sendq:
			cc.cork.Cork()
			err := cc.ws.Write(context.Background(), websocket.MessageText, data)
		batch:
			for n := 1; err == nil && n < 256; n++ {
				select {
				case data = <-cc.sendq:
					err = cc.ws.Write(context.Background(), websocket.MessageText, data)
				default:
					break batch
				}
			}
			if uerr := cc.cork.Uncork(); err == nil {
				err = uerr
			}
			if err != nil {
				_ = cc.ws.CloseNow() // the reader fails the pending calls
				return
			}
		case <-cc.done:
			return
		}
	}
}

// fail marks the connection dead and fails its pending calls.
func (cc *clientConn) fail() {
	cc.mu.Lock()
	cc.dead = true
	pending := cc.pending
	cc.pending = nil
	cc.mu.Unlock()
	for _, cb := range pending {
		cb(nil, errLost)
	}
}

// closeError returns how the server closed the connection, nil if it
// did not say.
func (cc *clientConn) closeError() *CloseError {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.closeErr
}

func (cc *clientConn) isDead() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.dead
}

func (cc *clientConn) take(corr string) func(*wsframe.ServerFrame, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cb := cc.pending[corr]
	delete(cc.pending, corr)
	return cb
}

// send writes f; when cb is set, f gets a corr and cb gets the answer (or
// errLost), called from the reader goroutine: it must not block.
func (cc *clientConn) send(f *wsframe.Frame, cb func(*wsframe.ServerFrame, error)) (string, error) {
	var corr string
	if cb != nil {
		corr = strconv.FormatUint(cc.c.corr.Add(1), 36)
		f.Corr = json.RawMessage(`"` + corr + `"`)
		cc.mu.Lock()
		if cc.dead {
			cc.mu.Unlock()
			return "", errLost
		}
		cc.pending[corr] = cb
		cc.mu.Unlock()
	}
	select {
	case cc.sendq <- wsframe.AppendFrame(nil, f):
		return corr, nil
	case <-cc.done:
		cc.take(corr)
		return "", errLost
	}
}

// sendOwned sends f with a corr, and cb gets its answer or errLost, exactly
// once: also when cc is lost before f could be queued (then sendOwned
// returns false and cb has had errLost, or will have it from fail). f is
// encoded before cb can run, so cb may hand f on to be sent again.
func (cc *clientConn) sendOwned(f *wsframe.Frame, cb func(*wsframe.ServerFrame, error)) bool {
	corr := strconv.FormatUint(cc.c.corr.Add(1), 36)
	f.Corr = json.RawMessage(`"` + corr + `"`)
	data := wsframe.AppendFrame(nil, f)
	cc.mu.Lock()
	if cc.dead {
		cc.mu.Unlock()
		cb(nil, errLost)
		return false
	}
	cc.pending[corr] = cb
	cc.mu.Unlock()
	select {
	case cc.sendq <- data:
		return true
	case <-cc.done:
		if cb := cc.take(corr); cb != nil {
			cb(nil, errLost)
		}
		return false
	}
}

// call sends f on this connection and waits for its answer.
func (cc *clientConn) call(ctx context.Context, f *wsframe.Frame) (*wsframe.ServerFrame, error) {
	ch := make(chan *wsframe.ServerFrame, 1)
	errc := make(chan error, 1)
	corr, err := cc.send(f, func(sf *wsframe.ServerFrame, err error) {
		if err != nil {
			errc <- err
			return
		}
		ch <- sf
	})
	if err != nil {
		return nil, err
	}
	select {
	case sf := <-ch:
		return sf, sf.Err()
	case err := <-errc:
		return nil, err
	case <-ctx.Done():
		cc.take(corr)
		return nil, ctx.Err()
	}
}
