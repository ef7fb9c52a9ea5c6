package ws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ratelimit"
	"github.com/promethean/promlib/ws/internal/cork"
	"github.com/promethean/promlib/ws/internal/wsframe"
	"golang.org/x/time/rate"
)

// conn is one client connection. The reader goroutine decodes frames and
// handles them in order; while no frame is pending, a goroutine with a
// small stack waits for the next and then reads on (readFrames). Everything else
// runs only while there is work: a writer goroutine while frames are
// queued (answers, EVENT frames that subscriptions deliver through the
// bus's handler goroutines, waiting when the queue is full, and the frames
// of live subscriptions that the gateway's topic readers put on the live
// queue, live.go), a recovery of a live SUBSCRIBE with since, an answerer
// while pipelined publishes are unanswered (answers.go), a ping while one
// is under way. The gateway's keeper (keeper.go) holds the connection's
// deadlines: the auth timeout, the token expiry and the next ping. An
// idle connection holds the reader goroutine alone.
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
	wg     sync.WaitGroup // the goroutines of the connection but the reader

	// The send queue: at most Config.SendQueue frames, written by a writer
	// goroutine that runs while it is not empty.
	qmu     sync.Mutex
	q       []*outFrame
	qhead   int
	writing bool          // writeLoop runs
	ended   bool          // no more frames, no more goroutines (spawn)
	room    chan struct{} // closed when the queue has room; nil unless one waits

	// The live queue (live.go), guarded by qmu too: the frames of live
	// subscriptions, written after the send queue's (a live subscription's
	// OK and recovered EVENTs go on the send queue before its live frames
	// go here). lqN and lqBytes count its frames and those kept for live
	// subscriptions not started yet, bounded by Config.LiveQueueEvents and
	// Config.LiveQueueBytes.
	lq       []liveItem
	lqhead   int
	lqN      int
	lqBytes  int
	liveDead atomic.Bool // closed for a slow live subscriber: nothing more is queued

	principal atomic.Pointer[auth.Principal]
	pinging   atomic.Bool
	pong      atomic.Pointer[context.CancelCauseFunc] // ends the wait of the ping under way (pongCame)
	frameMu   sync.Mutex                              // held while a frame is written through cork (writeRaw, pingWire)

	// wire is what the websocket library reads frames from (wire.go); nil
	// where the socket is not one it can read (TLS): then the library
	// reads it through a buffer, and waits for frames in the reader.
	wire      *wireReader
	failures  int // AUTH refused in a row; read and written by the reader goroutine
	closeOnce sync.Once
	closeCode atomic.Int32

	// noToken: the principal came with no token (authNoToken), and any
	// AUTH may replace it. Read and written by the reader goroutine.
	noToken bool

	pubLim     *rate.Limiter
	deliverLim *rate.Limiter

	mu   sync.Mutex // guards subs (written by the reader goroutine only) and live
	subs map[subKey]*subState
	live []*liveSub // live subscriptions, one per topic

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
		pubLim:     ratelimit.NewLimiter(g.cfg.RateLimits.Publish),
		deliverLim: ratelimit.NewLimiter(g.cfg.RateLimits.Deliver),
		subs:       make(map[subKey]*subState),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// serve runs the connection until it ends.
func (c *conn) serve() {
	c.g.obs.Connected()
	c.g.log.Debug("ws: connected", "conn", c.id, "remote", c.remote)
	c.readFrames()
}

// readFrames reads and handles frames until the connection ends, or
// until the socket has no byte pending (wire.go): then a goroutine of its
// own waits for the next frame and reads on (awaitFrames), and this one
// returns. So the goroutine of an idle connection has a small stack, not
// the one that handling frames grew, nor the one the websocket library's
// reader needs to wait in.
func (c *conn) readFrames() {
	for {
		if c.wire != nil && !c.wire.ready() {
			go c.awaitFrames()
			return
		}
		typ, r, err := c.ws.Reader(context.Background())
		if err == nil {
			err = c.readFrame(typ, r)
		}
		if err != nil {
			c.finish(err)
			return
		}
	}
}

// awaitFrames waits for the next frame, then reads on.
func (c *conn) awaitFrames() {
	c.wire.await()
	c.readFrames()
}

// finish ends the connection after its reading ended with err.
func (c *conn) finish(err error) {
	g := c.g
	// Give the in-flight events back first: another member of each group
	// gets them at once, whatever the socket still does.
	c.cancel()
	for _, s := range c.subsSnapshot() {
		s.close()
	}
	for _, s := range c.liveSnapshot() {
		s.endLive()
	}
	c.mu.Lock()
	clear(c.subs)
	c.live = nil
	c.mu.Unlock()
	_ = c.ws.CloseNow()
	c.end()
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
	g.connGone(c)
}

// readPool holds the buffers frames are read into, shared by all
// connections: a connection holds one only while it reads a frame.
var readPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readFrame reads and handles one frame.
func (c *conn) readFrame(typ websocket.MessageType, r io.Reader) error {
	buf := readPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 64<<10 { // do not keep a large frame's buffer
			readPool.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(r); err != nil {
		if errors.Is(err, websocket.ErrMessageTooBig) {
			c.closeCode.CompareAndSwap(0, int32(wsproto.CloseTooLarge))
		}
		return err
	}
	// The websocket library does not check that text is UTF-8; frames that
	// are not would reach subscribers in text frames, which browsers close
	// on invalid UTF-8.
	data := buf.Bytes()
	switch {
	case utf8.Valid(data):
		c.handle(data) // keeps nothing of data: the decoder copies
	case typ == websocket.MessageText:
		c.closeWith(wsproto.CloseInvalidUTF8, "bad_json: a text frame that is not valid UTF-8")
		return errInvalidUTF8
	default:
		c.fail(nil, wsproto.NewError(wsproto.CodeBadJSON, nil, "frame is not valid UTF-8"))
		c.g.obs.Handled("", wsproto.CodeBadJSON, 0)
	}
	return nil
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
	op           string // wsproto.OpOK, wsproto.OpErr, wsproto.OpEvent or wsproto.OpGap
	corr         json.RawMessage
	code         wsproto.Code
	msg          string // ERR message; a GAP's reason
	topic, group string // ERR about a subscription
	id           string // OK id
	seq          uint64 // OK seq; a GAP's from
	sub          *subState
	d            *event.Delivery

	liveOK int8          // the OK of a live SUBSCRIBE (okLive, ...)
	live   *liveSub      // a recovered EVENT's or a GAP's live subscription
	rec    *event.Record // a recovered EVENT's record
	to     uint64        // a GAP's to
}

// wItem is a frame the writer took: one of the send queue, or one of the
// live queue.
type wItem struct {
	f *outFrame
	l liveItem
}

// errInvalidUTF8 ends the read loop at a text frame that is not UTF-8.
var errInvalidUTF8 = errors.New("ws: text frame is not valid UTF-8")

// errExpired stops the writer at an EVENT that would leave after the
// principal's token expired.
var errExpired = errors.New("ws: token expired")

var framePool = sync.Pool{New: func() any { return new(outFrame) }}

func putFrame(f *outFrame) {
	*f = outFrame{}
	framePool.Put(f)
}

// enqueue puts f on the send queue, waiting for room until ctx ends, and
// starts the writer if it does not run. It reports false if f was not
// queued (ctx ended, or the connection did).
func (c *conn) enqueue(ctx context.Context, f *outFrame) bool {
	c.qmu.Lock()
	for !c.ended && len(c.q)-c.qhead >= c.g.cfg.SendQueue {
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
		c.qmu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			putFrame(f)
			return false
		}
		c.qmu.Lock()
	}
	if c.ended {
		c.qmu.Unlock()
		putFrame(f)
		return false
	}
	c.q = append(c.q, f)
	c.startWriter()
	c.qmu.Unlock()
	return true
}

// startWriter starts the writer if it does not run and a queue holds
// frames. Called with c.qmu held.
func (c *conn) startWriter() {
	if c.writing || c.ended || (len(c.q) == c.qhead && len(c.lq) == c.lqhead) {
		return
	}
	c.writing = true
	c.wg.Add(1)
	go c.writeLoop()
}

// spawn runs fn in a goroutine of the connection (serve waits for it),
// unless the connection has ended.
func (c *conn) spawn(fn func()) bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.spawnLocked(fn)
}

// spawnLocked is spawn, called with c.qmu held.
func (c *conn) spawnLocked(fn func()) bool {
	if c.ended {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// end drops what is queued and starts no goroutine from now on.
func (c *conn) end() {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	c.ended = true
	for _, f := range c.q[c.qhead:] {
		putFrame(f)
	}
	c.q, c.qhead = nil, 0
	clear(c.lq)
	c.lq, c.lqhead, c.lqN, c.lqBytes = nil, 0, 0, 0
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
}

// queued returns the number of frames in the send queue and in the live
// queue.
func (c *conn) queued() int {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return len(c.q) - c.qhead + len(c.lq) - c.lqhead
}

// liveQueued returns the number of frames in the live queue.
func (c *conn) liveQueued() int {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return len(c.lq) - c.lqhead
}

// take moves up to 256 queued frames to batch, or reports false (and the
// writer ends) when the queues are empty. Frames of the live queue are
// taken only when the send queue is empty, so that what is on the send
// queue (the OK of a live SUBSCRIBE, its recovered EVENTs) leaves before
// what is on the live queue.
func (c *conn) take(batch []wItem) ([]wItem, bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	n := min(len(c.q)-c.qhead, 256)
	if c.ended || (n == 0 && len(c.lq) == c.lqhead) {
		c.writing = false
		if cap(c.q) > 4*c.g.cfg.SendQueue || c.ended {
			c.q = nil // do not keep a burst's queue
		}
		c.q, c.qhead = c.q[:0], 0
		if cap(c.lq) > 16 || c.ended {
			c.lq = nil // nor a burst's live queue: an idle connection keeps little
		}
		c.lq, c.lqhead = c.lq[:0], 0
		return batch, false
	}
	for _, f := range c.q[c.qhead : c.qhead+n] {
		batch = append(batch, wItem{f: f})
	}
	clear(c.q[c.qhead : c.qhead+n])
	if c.qhead += n; c.qhead == len(c.q) {
		c.q, c.qhead = c.q[:0], 0
		bytes := 0
		for c.lqhead < len(c.lq) && len(batch) < 256 && (bytes < liveTakeBytes || len(batch) == 0) {
			it := c.lq[c.lqhead]
			c.lq[c.lqhead] = liveItem{}
			c.lqhead++
			bytes += len(it.f.b)
			c.lqN--
			c.lqBytes -= len(it.f.b)
			it.sub.queued--
			if it.sub.gap == it.f {
				it.sub.gap = nil // written now: a later overflow starts another
			}
			batch = append(batch, wItem{l: it})
		}
		if c.lqhead == len(c.lq) {
			c.lq, c.lqhead = c.lq[:0], 0
		}
	}
	if c.room != nil && n > 0 {
		close(c.room)
		c.room = nil
	}
	return batch, true
}

func (c *conn) ok(corr json.RawMessage, id string, seq uint64) {
	f := framePool.Get().(*outFrame)
	f.op, f.corr, f.id, f.seq = wsproto.OpOK, corr, id, seq
	c.answer(f)
}

func (c *conn) fail(corr json.RawMessage, e *wsproto.Error) {
	f := framePool.Get().(*outFrame)
	f.op, f.corr, f.code, f.msg = wsproto.OpErr, corr, e.Code, e.Msg
	c.answer(f)
}

// bufPool holds the writers' encoding buffers, shared by all connections.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// writeLoop writes the queued frames until the queue is empty.
func (c *conn) writeLoop() {
	defer c.wg.Done()
	bp := bufPool.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() {
		if cap(buf) <= 64<<10 {
			*bp = buf[:0]
			bufPool.Put(bp)
		}
	}()
	var batch []wItem
	for {
		var more bool
		if batch, more = c.take(batch[:0]); !more {
			return
		}
		// Write what is queued in one go: corked, the frames leave in one
		// system call. Every write to the socket has a deadline of
		// WriteTimeout (see ServeHTTP).
		c.cork.Cork()
		var err error
		for i, it := range batch {
			switch {
			case err != nil:
				if it.f != nil {
					putFrame(it.f)
				}
			case it.f != nil:
				buf, err = c.write(it.f, buf)
			default:
				buf, err = c.writeLive(it.l, buf)
			}
			batch[i] = wItem{}
		}
		if uerr := c.cork.Uncork(); err == nil {
			err = uerr
		}
		if err != nil {
			c.writeFailed(err)
			return
		}
	}
}

// writeFailed ends the connection after a failed write.
func (c *conn) writeFailed(err error) {
	c.qmu.Lock()
	c.writing = false
	c.qmu.Unlock()
	c.end()
	if errors.Is(err, errExpired) {
		c.closeWith(wsproto.CloseTokenExpired, "token_expired: the token expired and was not refreshed")
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		// The client does not read: its socket is full, so no close frame
		// can reach it. Drop it; serve gives its in-flight events back at
		// once.
		c.closeCode.CompareAndSwap(0, int32(wsproto.CloseWriteTimeout))
		c.g.log.Warn("ws: write timeout: the client does not read", "conn", c.id, "remote", c.remote, "timeout", c.g.cfg.WriteTimeout)
	} else {
		c.g.log.Debug("ws: write failed", "conn", c.id, "err", err)
	}
	c.cancel()
	_ = c.ws.CloseNow()
}

// ping pings the peer, and drops the connection if no pong comes within
// PingTimeout. The keeper starts it every PingInterval, unless one is
// under way; it runs apart from the writer, so that a writer blocked on a
// client that does not read does not stop it.
func (c *conn) ping() {
	defer c.pinging.Store(false)
	if c.wire != nil {
		c.pingWire()
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	timeout := c.g.cfg.Clock.AfterFunc(c.g.cfg.PingTimeout, cancel)
	err := c.ws.Ping(ctx)
	timedOut := !timeout.Stop()
	// A ping that timed out may have had its write cut short, which closes
	// the socket and so ends c.ctx too: it is still a ping timeout.
	if err != nil && (timedOut || c.ctx.Err() == nil) {
		c.pingTimedOut(err)
	}
}

// pingFrame is a ping with no payload, as a server sends it (unmasked).
var pingFrame = []byte{0x80 | 0x9, 0}

// pingWire is ping where the wire reader takes the pongs off the stream
// (wire.go), so that the websocket library, which never sees them, cannot
// tell its Ping that one came: the ping frame is written here, between
// the writer's frames (frameMu), and the wire reader's pongCame ends the
// wait. (Ending the context of the library's Ping on the pong instead is
// not safe: the library closes the connection when the context of a write
// ends before the write has quite returned, and a pong can come that
// soon.)
func (c *conn) pingWire() {
	ctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	c.pong.Store(&cancel)
	defer c.pong.Store(nil)
	timeout := c.g.cfg.Clock.AfterFunc(c.g.cfg.PingTimeout, func() {
		cancel(errPingTimeout)
		if context.Cause(ctx) == errPingTimeout { // not a pong first
			c.pingTimedOut(errPingTimeout)
		}
	})
	defer timeout.Stop()
	c.frameMu.Lock()
	_, err := c.cork.Write(pingFrame)
	c.frameMu.Unlock()
	if err != nil {
		cancel(err)
	}
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != errPong && cause != errPingTimeout && c.ctx.Err() == nil {
		c.pingTimedOut(cause) // the write failed
	}
}

// pingTimedOut drops the connection: the peer does not answer pings. No
// close handshake to wait for.
func (c *conn) pingTimedOut(err error) {
	c.closeCode.CompareAndSwap(0, int32(wsproto.ClosePingTimeout))
	c.g.log.Debug("ws: ping timeout", "conn", c.id, "err", err)
	c.cancel()
	_ = c.ws.CloseNow()
}

// pongCame is the wire reader's report of a pong: it ends the wait of the
// ping under way, if one is.
func (c *conn) pongCame() {
	if cancel := c.pong.Swap(nil); cancel != nil {
		(*cancel)(errPong)
	}
}

// errPong and errPingTimeout end the wait of a ping.
var (
	errPong        = errors.New("ws: pong")
	errPingTimeout = errors.New("ws: ping timeout")
)

// write writes one frame, using buf for its encoding.
func (c *conn) write(f *outFrame, buf []byte) ([]byte, error) {
	defer putFrame(f)
	switch f.op {
	case wsproto.OpOK:
		switch f.liveOK {
		case okPlain:
			buf = wsframe.AppendOK(buf[:0], f.corr, f.id, f.seq)
		case okLive:
			buf = wsframe.AppendLiveOK(buf[:0], f.corr, f.seq, nil)
		default:
			recovered := f.liveOK == okRecovered
			buf = wsframe.AppendLiveOK(buf[:0], f.corr, f.seq, &recovered)
		}
	case wsproto.OpErr:
		buf = wsframe.AppendErr(buf[:0], f.corr, f.code, f.msg, f.topic, f.group)
	case wsproto.OpGap, wsproto.OpEvent:
		if s := f.live; s != nil {
			// A recovered EVENT, or a GAP, of a live subscription.
			if s.closed.Load() {
				return buf, nil
			}
			if p := c.principal.Load(); p == nil || p.Expired(c.g.now()) {
				return buf, errExpired
			}
			if f.op == wsproto.OpGap {
				buf = wsframe.AppendGap(buf[:0], s.topic, f.seq, f.to, f.msg)
			} else {
				buf = wsframe.AppendLiveEvent(buf[:0], s.topic, f.rec)
				defer c.g.obs.Sent(s.topic, "")
			}
			break
		}
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
	return buf, c.writeRaw(buf)
}

// writeLive writes a frame of the live queue: its shared bytes as they
// are, or a GAP of its subscription encoded into buf.
func (c *conn) writeLive(it liveItem, buf []byte) ([]byte, error) {
	s, fr := it.sub, it.f
	if s.closed.Load() || c.liveDead.Load() {
		return buf, nil
	}
	// As for EVENTs of groups: none leaves after the token expired.
	if p := c.principal.Load(); p == nil || p.Expired(c.g.now()) {
		return buf, errExpired
	}
	b := fr.b
	if b == nil {
		buf = wsframe.AppendGap(buf[:0], s.topic, fr.from, fr.to, fr.reason)
		b = buf
	}
	if err := c.writeRaw(b); err != nil {
		return buf, err
	}
	if fr.reason == "" {
		c.g.obs.Sent(s.topic, "")
	}
	return buf, nil
}

// writeRaw writes one encoded frame to the socket.
func (c *conn) writeRaw(b []byte) error {
	if c.cork == nil {
		// Without the socket (it could not be wrapped), each write has the
		// deadline of its context instead.
		ctx, cancel := context.WithTimeout(context.Background(), c.g.cfg.WriteTimeout)
		defer cancel()
		return c.ws.Write(ctx, websocket.MessageText, b)
	}
	c.frameMu.Lock()
	defer c.frameMu.Unlock()
	return c.ws.Write(context.Background(), websocket.MessageText, b)
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
