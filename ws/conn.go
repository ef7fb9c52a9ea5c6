package ws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/cork"
	"github.com/promethean/promlib/internal/wsframe"
	"github.com/promethean/promlib/ratelimit"
	"golang.org/x/time/rate"
)

// conn is one client connection. The reader goroutine (the one running
// ServeHTTP) decodes frames and handles them in order; the writer
// goroutine owns the socket's writes, the auth deadline, the token expiry
// (a timer, and a check before every EVENT) and the keepalive.
// Subscriptions deliver through the bus's handler goroutines, which put
// EVENT frames on the bounded send queue and wait when it is full.
type conn struct {
	g      *Gateway
	ws     *websocket.Conn
	cork   *cork.Conn // the socket under ws; nil if it could not be wrapped
	id     uint64
	remote string
	client string // key of the client address, for the failed AUTH limit
	opened time.Time

	ctx    context.Context // ends when the connection ends
	cancel context.CancelFunc
	sendq  chan *outFrame
	wg     sync.WaitGroup // writer and pings

	principal atomic.Pointer[auth.Principal]
	expiry    chan struct{} // the principal changed (cap 1)
	pinging   atomic.Bool
	failures  int // AUTH refused in a row; read and written by the reader goroutine
	closeOnce sync.Once
	closeCode atomic.Int32

	pubLim     *rate.Limiter
	deliverLim *rate.Limiter

	mu   sync.Mutex // guards subs; written by the reader goroutine only
	subs map[subKey]*subState

	pub       atomic.Pointer[event.Publisher] // of PUBLISH frames; made at the first one by the reader goroutine
	amu       sync.Mutex                      // guards the answers in line (answers.go)
	answers   []answer
	ahead     int           // answers[ahead:] are in line
	answering bool          // answerLoop runs
	answered  chan struct{} // closed when answerLoop ends
}

type subKey struct{ topic, group string }

func newConn(g *Gateway, ws *websocket.Conn, remote string) *conn {
	ws.SetReadLimit(g.cfg.ReadLimit)
	c := &conn{
		g: g, ws: ws, id: g.nextID.Add(1), remote: remote, opened: time.Now(),
		sendq:      make(chan *outFrame, g.cfg.SendQueue),
		expiry:     make(chan struct{}, 1),
		pubLim:     ratelimit.NewLimiter(g.cfg.RateLimits.Publish),
		deliverLim: ratelimit.NewLimiter(g.cfg.RateLimits.Deliver),
		subs:       make(map[subKey]*subState),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// serve runs the connection until it ends.
func (c *conn) serve() {
	g := c.g
	g.obs.Connected()
	g.log.Debug("ws: connected", "conn", c.id, "remote", c.remote)
	c.wg.Add(1)
	go c.writeLoop()

	err := c.readLoop()

	// Give the in-flight events back first: another member of each group
	// gets them at once, whatever the socket still does.
	c.cancel()
	for _, s := range c.subsSnapshot() {
		s.close()
	}
	c.mu.Lock()
	clear(c.subs)
	c.mu.Unlock()
	_ = c.ws.CloseNow()
	c.wg.Wait()

	code := int(c.closeCode.Load())
	if code == 0 {
		code = int(websocket.CloseStatus(err))
		if code < 0 {
			code = int(websocket.StatusAbnormalClosure)
		}
	}
	g.obs.Disconnected(code, time.Since(c.opened))
	g.log.Debug("ws: disconnected", "conn", c.id, "remote", c.remote, "code", code, "err", err)
}

func (c *conn) readLoop() error {
	var buf bytes.Buffer
	for {
		typ, r, err := c.ws.Reader(context.Background())
		if err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
				c.closeCode.CompareAndSwap(0, int32(CloseTooLarge))
			}
			return err
		}
		// The websocket library does not check that text is UTF-8; frames
		// that are not would reach subscribers in text frames, which
		// browsers close on invalid UTF-8.
		if data := buf.Bytes(); !utf8.Valid(data) {
			if typ == websocket.MessageText {
				c.closeWith(CloseInvalidUTF8, "bad_json: a text frame that is not valid UTF-8")
				return errInvalidUTF8
			}
			c.fail(nil, newError(CodeBadJSON, nil, "frame is not valid UTF-8"))
			c.g.obs.Handled("", CodeBadJSON, 0)
		} else {
			c.handle(data)
		}
		if buf.Cap() > 64<<10 {
			buf = bytes.Buffer{} // do not keep a large frame's buffer
		}
	}
}

// closeWith ends the connection with a close code and reason; the first
// call wins. It blocks until the close handshake is done (at most ~10s).
func (c *conn) closeWith(code int, reason string) {
	c.closeOnce.Do(func() {
		c.closeCode.CompareAndSwap(0, int32(code))
		c.cancel() // nothing waits on the send queue any more
		c.g.log.Debug("ws: closing", "conn", c.id, "code", code, "reason", reason)
		_ = c.ws.Close(websocket.StatusCode(code), reason)
	})
}

// outFrame is a frame waiting in the send queue.
type outFrame struct {
	op           string // wsframe.OpOK, wsframe.OpErr or wsframe.OpEvent
	corr         json.RawMessage
	code         Code
	msg          string // ERR message
	topic, group string // ERR about a subscription
	id           string // OK id
	seq          uint64
	sub          *subState
	d            *event.Delivery
}

// errInvalidUTF8 ends the read loop at a text frame that is not UTF-8.
var errInvalidUTF8 = errors.New("ws: text frame is not valid UTF-8")

// errExpired stops the writer at an EVENT that would leave after the
// principal's token expired.
var errExpired = errors.New("ws: token expired")

var framePool = sync.Pool{New: func() any { return new(outFrame) }}

// enqueue puts f on the send queue, waiting for room until ctx ends.
func (c *conn) enqueue(ctx context.Context, f *outFrame) bool {
	select {
	case c.sendq <- f:
		return true
	default:
	}
	select {
	case c.sendq <- f:
		return true
	case <-ctx.Done():
		*f = outFrame{}
		framePool.Put(f)
		return false
	}
}

func (c *conn) ok(corr json.RawMessage, id string, seq uint64) {
	f := framePool.Get().(*outFrame)
	f.op, f.corr, f.id, f.seq = wsframe.OpOK, corr, id, seq
	c.answer(f)
}

func (c *conn) fail(corr json.RawMessage, e *Error) {
	f := framePool.Get().(*outFrame)
	f.op, f.corr, f.code, f.msg = wsframe.OpErr, corr, e.Code, e.Msg
	c.answer(f)
}

func (c *conn) writeLoop() {
	defer c.wg.Done()
	cfg := &c.g.cfg
	clk := cfg.Clock
	authT := clk.NewTimer(cfg.AuthTimeout)
	defer authT.Stop()
	expT := clk.NewTimer(time.Hour)
	expT.Stop()
	defer expT.Stop()
	if cfg.PingInterval > 0 {
		// Pings have a loop of their own, so that a writer blocked on a
		// client that does not read does not stop them.
		c.wg.Add(1)
		go c.pingLoop()
	}
	busDone := c.g.bus.Done()
	var buf []byte
	for {
		select {
		case f := <-c.sendq:
			// Write what is queued in one go: corked, the frames leave in
			// one system call. Every write to the socket has a deadline
			// of WriteTimeout (see ServeHTTP).
			c.cork.Cork()
			var err error
			buf, err = c.write(f, buf)
		batch:
			for n := 1; err == nil && n < 256; n++ {
				select {
				case f = <-c.sendq:
					buf, err = c.write(f, buf)
				default:
					break batch
				}
			}
			if uerr := c.cork.Uncork(); err == nil {
				err = uerr
			}
			if errors.Is(err, errExpired) {
				c.closeWith(CloseTokenExpired, "token_expired: the token expired and was not refreshed")
				return
			}
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
					// The client does not read: its socket is full, so no
					// close frame can reach it. Drop it; serve gives its
					// in-flight events back at once.
					c.closeCode.CompareAndSwap(0, int32(CloseWriteTimeout))
					c.g.log.Warn("ws: write timeout: the client does not read", "conn", c.id, "remote", c.remote, "timeout", cfg.WriteTimeout)
				} else {
					c.g.log.Debug("ws: write failed", "conn", c.id, "err", err)
				}
				c.cancel()
				_ = c.ws.CloseNow()
				return
			}
			if cap(buf) > 64<<10 {
				buf = nil
			}
		case <-authT.C():
			if c.principal.Load() == nil {
				c.closeWith(CloseAuthTimeout, fmt.Sprintf("unauthorized: no AUTH within %v", cfg.AuthTimeout))
				return
			}
		case <-c.expiry:
			expT.Stop()
			if p := c.principal.Load(); p != nil && !p.Expiry.IsZero() {
				expT.Reset(max(p.Expiry.Sub(c.g.now()), 0))
			}
		case <-expT.C():
			if p := c.principal.Load(); p != nil && !p.Expiry.IsZero() {
				if left := p.Expiry.Sub(c.g.now()); left > 0 {
					expT.Reset(left)
					continue
				}
				c.closeWith(CloseTokenExpired, "token_expired: the token expired and was not refreshed")
				return
			}
		case <-busDone:
			// Nothing more can be published or delivered here: say so,
			// rather than leave subscribers waiting in silence.
			c.closeWith(CloseGoingAway, "bus closed")
			return
		case <-c.ctx.Done():
			return
		}
	}
}

// pingLoop starts a ping every PingInterval, unless one is under way.
func (c *conn) pingLoop() {
	defer c.wg.Done()
	interval := c.g.cfg.PingInterval
	t := c.g.cfg.Clock.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			t.Reset(interval)
			if c.pinging.CompareAndSwap(false, true) {
				c.wg.Add(1)
				go c.ping()
			}
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *conn) ping() {
	defer c.wg.Done()
	defer c.pinging.Store(false)
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	timeout := c.g.cfg.Clock.AfterFunc(c.g.cfg.PingTimeout, cancel)
	err := c.ws.Ping(ctx)
	timedOut := !timeout.Stop()
	// A ping that timed out may have had its write cut short, which closes
	// the socket and so ends c.ctx too: it is still a ping timeout.
	if err != nil && (timedOut || c.ctx.Err() == nil) {
		// The peer does not answer: no close handshake to wait for.
		c.closeCode.CompareAndSwap(0, int32(ClosePingTimeout))
		c.g.log.Debug("ws: ping timeout", "conn", c.id, "err", err)
		c.cancel()
		_ = c.ws.CloseNow()
	}
}

// write writes one frame, using buf for its encoding.
func (c *conn) write(f *outFrame, buf []byte) ([]byte, error) {
	defer func() {
		*f = outFrame{}
		framePool.Put(f)
	}()
	switch f.op {
	case wsframe.OpOK:
		buf = wsframe.AppendOK(buf[:0], f.corr, f.id, f.seq)
	case wsframe.OpErr:
		buf = wsframe.AppendErr(buf[:0], f.corr, f.code, f.msg, f.topic, f.group)
	case wsframe.OpEvent:
		s, d := f.sub, f.d
		if s.closed.Load() {
			return buf, nil // given back to the group when s closed
		}
		// The timer closes the connection when the token expires; this
		// check makes sure that no EVENT leaves after that, whatever the
		// writer was busy with when the timer fired. The delivery goes
		// back to the group when the connection closes.
		if p := c.principal.Load(); p == nil || p.Expired(c.g.now()) {
			s.forget(d.ID, d.Attempt)
			return buf, errExpired
		}
		// The attempt counts, and its lease runs, from here: a delivery
		// whose EVENT never leaves goes back to the group uncounted.
		if !d.Start() {
			s.forget(d.ID, d.Attempt) // its lease ended while it waited here
			return buf, nil
		}
		s.extend(d.ID, d.Attempt, d.Deadline)
		now := c.g.now()
		buf = wsframe.AppendEvent(buf[:0], s.topic, s.group, &d.Record, d.Attempt, wsframe.DeadlineMS(d.Deadline, now))
		defer c.g.obs.Sent(s.topic, s.group)
	}
	if c.cork == nil {
		// Without the socket (it could not be wrapped), each write has the
		// deadline of its context instead.
		ctx, cancel := context.WithTimeout(context.Background(), c.g.cfg.WriteTimeout)
		defer cancel()
		return buf, c.ws.Write(ctx, websocket.MessageText, buf)
	}
	return buf, c.ws.Write(context.Background(), websocket.MessageText, buf)
}

func (c *conn) subsSnapshot() []*subState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*subState, 0, len(c.subs))
	for _, s := range c.subs {
		out = append(out, s)
	}
	return out
}
