package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/promethean/promlib/event"
)

// Defaults of [ClientOptions].
const (
	DefaultMinBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff      = 10 * time.Second
	DefaultDialTimeout     = 10 * time.Second
	DefaultClientReadLimit = 16 << 20
	DefaultClientPing      = 30 * time.Second
)

// ClientOptions configure a [Client]. The zero value of each field means
// its default. Options are copied by Dial.
type ClientOptions struct {
	// Token is sent with AUTH.
	Token string
	// TokenFunc, if set, is called for the token at every (re)connect,
	// instead of using Token; use it for tokens that expire. A connection
	// whose token expires is closed by the gateway (4401) and dialled again
	// with a fresh token; [Client.Auth] refreshes it without reconnecting.
	TokenFunc func(ctx context.Context) (string, error)
	// HTTPHeader and HTTPClient are used for the WebSocket handshake.
	HTTPHeader http.Header
	HTTPClient *http.Client
	// DisableReconnect makes a lost connection final: calls then fail with
	// ErrDisconnected. By default the client reconnects with exponential
	// backoff (MinBackoff to MaxBackoff, with jitter), authenticates again
	// and subscribes again; durable groups mean nothing is lost.
	DisableReconnect bool
	MinBackoff       time.Duration
	MaxBackoff       time.Duration
	// DialTimeout bounds each connection attempt, AUTH included (default
	// 10s).
	DialTimeout time.Duration
	// ReadLimit is the largest server frame accepted (default 16 MiB).
	ReadLimit int64
	// PingInterval is how often the client pings the server to notice a
	// dead connection (default 30s; negative disables).
	PingInterval time.Duration
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

func (o *ClientOptions) setDefaults() {
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ReadLimit == 0 {
		o.ReadLimit = DefaultClientReadLimit
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultClientPing
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Client is a connection to a [Gateway] (or any server of the protocol)
// that reconnects by itself. It is safe for concurrent use.
type Client struct {
	url  string
	opts ClientOptions
	log  *slog.Logger

	ctx    context.Context // the client's life
	cancel context.CancelFunc
	wg     sync.WaitGroup
	corr   atomic.Uint64
	gen    atomic.Uint64

	transport *http.Transport // ours, when opts has no HTTPClient
	lastCork  *corkConn       // the socket the transport dialled last

	mu      sync.Mutex
	cur     *clientConn // nil while disconnected
	changed chan struct{}
	lost    bool // disconnected for good (DisableReconnect)
	closed  bool
	subs    map[subKey]*Subscription
}

// Dial connects to url (ws:// or wss://) and authenticates. It fails if
// the first connection or its AUTH fails; later losses are reconnected in
// the background unless opts.DisableReconnect.
func Dial(ctx context.Context, url string, opts *ClientOptions) (*Client, error) {
	var o ClientOptions
	if opts != nil {
		o = *opts
		o.HTTPHeader = opts.HTTPHeader.Clone()
	}
	o.setDefaults()
	c := &Client{url: url, opts: o, log: o.Logger, changed: make(chan struct{}), subs: make(map[subKey]*Subscription)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if o.HTTPClient == nil {
		// Our own transport, so that the socket is a corkConn and queued
		// frames leave together.
		c.transport = http.DefaultTransport.(*http.Transport).Clone()
		dialer := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
		c.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			cc := &corkConn{Conn: conn}
			c.mu.Lock()
			c.lastCork = cc
			c.mu.Unlock()
			return cc, nil
		}
		c.opts.HTTPClient = &http.Client{Transport: c.transport}
	}
	cc, err := c.connect(ctx)
	if err != nil {
		c.cancel()
		c.wg.Wait()
		if c.transport != nil {
			c.transport.CloseIdleConnections()
		}
		return nil, err
	}
	c.setConn(cc)
	c.wg.Add(1)
	go c.supervise(cc)
	return c, nil
}

// clientConn is one WebSocket connection of a Client.
type clientConn struct {
	c     *Client
	ws    *websocket.Conn
	cork  *corkConn // nil with a caller's HTTPClient
	gen   uint64
	done  chan struct{} // closed when the reader has stopped
	sendq chan []byte   // encoded frames for the writer

	mu      sync.Mutex
	pending map[string]func(*serverFrame, error)
	dead    bool
}

// errLost is what a call on a connection that ended gets.
var errLost = errors.New("ws: connection lost")

// serverFrame is a decoded server frame.
type serverFrame struct {
	Op    string        `json:"op"`
	Corr  string        `json:"corr"`
	ID    string        `json:"id"`
	Seq   uint64        `json:"seq"`
	Code  Code          `json:"code"`
	Msg   string        `json:"msg"`
	Topic string        `json:"topic"`
	Group string        `json:"group"`
	Event *event.Record `json:"event"`
	Ctx   struct {
		Attempt       int   `json:"attempt"`
		AckDeadlineMS int64 `json:"ack_deadline_ms"`
	} `json:"ctx"`
}

func (f *serverFrame) err() error {
	if f.Op == OpErr {
		return &Error{Code: f.Code, Msg: f.Msg}
	}
	return nil
}

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
			return nil, fmt.Errorf("ws: get token: %w", err)
		}
		token = t
	}
	c.mu.Lock()
	c.lastCork = nil
	c.mu.Unlock()
	ws, _, err := websocket.Dial(ctx, c.url, &websocket.DialOptions{HTTPHeader: c.opts.HTTPHeader, HTTPClient: c.opts.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("ws: dial %s: %w", c.url, err)
	}
	ws.SetReadLimit(c.opts.ReadLimit)
	cc := &clientConn{
		c: c, ws: ws, gen: c.gen.Add(1), done: make(chan struct{}), sendq: make(chan []byte, 256),
		pending: make(map[string]func(*serverFrame, error)),
	}
	c.mu.Lock()
	cc.cork, c.lastCork = c.lastCork, nil
	c.mu.Unlock()
	c.wg.Add(2)
	go cc.readLoop()
	go cc.writeLoop()
	if _, err := cc.call(ctx, &Frame{Op: OpAuth, Token: token}); err != nil {
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
			cc.fail()
			_ = cc.ws.CloseNow()
			if c.ctx.Err() == nil {
				c.log.Debug("ws: client connection lost", "url", c.url, "err", err)
			}
			return
		}
		f, ok := decodeServerFast(data)
		if !ok {
			f = &serverFrame{}
			if err := json.Unmarshal(data, f); err != nil {
				c.log.Warn("ws: bad frame from server", "err", err)
				continue
			}
		}
		switch f.Op {
		case OpOK, OpErr:
			switch cb := cc.take(f.Corr); {
			case cb != nil:
				cb(f, nil)
			case f.Op == OpErr && f.Topic != "":
				c.subscriptionEnded(f)
			case f.Op == OpErr:
				c.log.Warn("ws: server error", "code", f.Code, "msg", f.Msg)
			}
		case OpEvent:
			c.route(cc, f)
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
			cc.cork.cork()
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
			if uerr := cc.cork.uncork(); err == nil {
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

func (cc *clientConn) isDead() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.dead
}

func (cc *clientConn) take(corr string) func(*serverFrame, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cb := cc.pending[corr]
	delete(cc.pending, corr)
	return cb
}

// send writes f; when cb is set, f gets a corr and cb gets the answer (or
// errLost), called from the reader goroutine: it must not block.
func (cc *clientConn) send(f *Frame, cb func(*serverFrame, error)) (string, error) {
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
	case cc.sendq <- appendFrame(nil, f):
		return corr, nil
	case <-cc.done:
		cc.take(corr)
		return "", errLost
	}
}

// call sends f on this connection and waits for its answer.
func (cc *clientConn) call(ctx context.Context, f *Frame) (*serverFrame, error) {
	ch := make(chan *serverFrame, 1)
	errc := make(chan error, 1)
	corr, err := cc.send(f, func(sf *serverFrame, err error) {
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
		return sf, sf.err()
	case err := <-errc:
		return nil, err
	case <-ctx.Done():
		cc.take(corr)
		return nil, ctx.Err()
	}
}

func (c *Client) setConn(cc *clientConn) {
	c.mu.Lock()
	c.cur = cc
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// conn waits for a live connection.
func (c *Client) conn(ctx context.Context) (*clientConn, error) {
	for {
		c.mu.Lock()
		cc, ch, closed, lost := c.cur, c.changed, c.closed, c.lost
		c.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case cc != nil && !cc.isDead():
			return cc, nil
		case lost:
			return nil, ErrDisconnected
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// call sends f and waits for its answer. With retry, a call whose
// connection is lost is sent again on the next one (for idempotent calls).
func (c *Client) call(ctx context.Context, f *Frame, retry bool) (*serverFrame, error) {
	for {
		cc, err := c.conn(ctx)
		if err != nil {
			return nil, err
		}
		sf, err := cc.call(ctx, f)
		if !errors.Is(err, errLost) {
			return sf, err
		}
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if !retry || c.opts.DisableReconnect {
			return nil, ErrDisconnected
		}
	}
}

// supervise watches the connection, pings it, and reconnects when it is
// lost.
func (c *Client) supervise(cc *clientConn) {
	defer c.wg.Done()
	var pingC <-chan time.Time
	if c.opts.PingInterval > 0 {
		t := time.NewTicker(c.opts.PingInterval)
		defer t.Stop()
		pingC = t.C
	}
	for {
		select {
		case <-c.ctx.Done():
			cc.close()
			return
		case <-pingC:
			ctx, cancel := context.WithTimeout(c.ctx, c.opts.PingInterval)
			if err := cc.ws.Ping(ctx); err != nil && c.ctx.Err() == nil {
				c.log.Debug("ws: ping failed", "url", c.url, "err", err)
				_ = cc.ws.CloseNow()
			}
			cancel()
			continue
		case <-cc.done:
		}
		c.mu.Lock()
		c.cur = nil
		if c.opts.DisableReconnect {
			c.lost = true
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		if c.opts.DisableReconnect {
			c.log.Warn("ws: connection lost; not reconnecting", "url", c.url)
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
	backoff := c.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		wait := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(wait)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, c.opts.MaxBackoff)
		cc, err := c.connect(c.ctx)
		if err != nil {
			if c.ctx.Err() != nil {
				return nil
			}
			c.log.Warn("ws: reconnect failed", "url", c.url, "attempt", attempt, "err", err)
			continue
		}
		if err := c.resubscribe(cc); err != nil {
			cc.close()
			if c.ctx.Err() != nil {
				return nil
			}
			c.log.Warn("ws: resubscribe failed", "url", c.url, "attempt", attempt, "err", err)
			continue
		}
		c.log.Info("ws: reconnected", "url", c.url, "attempt", attempt)
		c.setConn(cc)
		return cc
	}
}

// resubscribe subscribes every subscription again on cc (and pauses the
// paused ones). A subscription the server now refuses ends with that error.
func (c *Client) resubscribe(cc *clientConn) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.DialTimeout)
	defer cancel()
	for _, s := range c.subsSnapshot() {
		_, err := cc.call(ctx, s.frame(OpSubscribe))
		var pe *Error
		switch {
		case errors.As(err, &pe) && pe.Code != CodeAlreadySubscribed:
			c.log.Warn("ws: subscription refused after reconnect", "topic", s.topic, "group", s.group, "err", err)
			s.end(err)
			continue
		case err != nil && pe == nil:
			return err
		}
		if s.isPaused() {
			if _, err := cc.call(ctx, s.frame(OpPause)); err != nil && !errors.As(err, &pe) {
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

// route hands an EVENT to its subscription.
func (c *Client) route(cc *clientConn, f *serverFrame) {
	if f.Event == nil {
		c.log.Warn("ws: EVENT without event", "topic", f.Topic, "group", f.Group)
		return
	}
	c.mu.Lock()
	s := c.subs[subKey{f.Topic, f.Group}]
	c.mu.Unlock()
	if s == nil {
		return // unsubscribed meanwhile; the server gives it back
	}
	s.push(&Message{
		Record:   *f.Event,
		Group:    f.Group,
		Attempt:  f.Ctx.Attempt,
		Deadline: time.Now().Add(time.Duration(f.Ctx.AckDeadlineMS) * time.Millisecond),
		sub:      s,
		cc:       cc,
	})
}

// subscriptionEnded ends the subscription an ERR without corr names: the
// server ended it (a re-AUTH whose token may not hold it).
func (c *Client) subscriptionEnded(f *serverFrame) {
	c.mu.Lock()
	s := c.subs[subKey{f.Topic, f.Group}]
	c.mu.Unlock()
	c.log.Warn("ws: subscription ended by the server", "topic", f.Topic, "group", f.Group, "code", f.Code, "msg", f.Msg)
	if s != nil {
		s.end(f.err())
	}
}

// Auth sends AUTH with token on the live connection (waiting for one if
// the client is reconnecting), to refresh a token before it expires: the
// connection and its subscriptions stay. The server refuses a token for
// another subject than the connection's (an error matching
// [ErrAuthFailed]) and keeps the previous token; subscriptions the new
// token may not hold end, with an error matching [ErrForbidden] (see
// [Subscription.Err]). Once accepted, the token is also the one sent when
// the client reconnects, unless ClientOptions.TokenFunc is set.
func (c *Client) Auth(ctx context.Context, token string) error {
	if _, err := c.call(ctx, &Frame{Op: OpAuth, Token: token}, false); err != nil {
		return err
	}
	c.mu.Lock()
	c.opts.Token = token
	c.mu.Unlock()
	return nil
}

// Close ends the client: subscriptions stop (running handlers may finish,
// up to their drain timeout), and the connection is closed, which gives
// every in-flight event back to its group. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.changed)
	c.changed = make(chan struct{})
	subs := make([]*Subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.stop(ErrClosed)
	}
	c.cancel()
	c.wg.Wait()
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
	return nil
}

// PublishResult is the stored event's id and seq.
type PublishResult struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
}

// Publish publishes payload (one JSON value) to topic and waits for the
// server's OK. Without an id in opts the client makes one (a UUIDv7), so
// that a publish cut off by a lost connection is sent again after the
// reconnect without being stored twice.
func (c *Client) Publish(ctx context.Context, topic string, payload []byte, opts ...event.PublishOption) (PublishResult, error) {
	var o event.PublishOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := event.ValidateTopic(topic); err != nil {
		return PublishResult{}, err
	}
	if !json.Valid(payload) {
		return PublishResult{}, invalid("payload", "not one valid JSON value")
	}
	if o.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return PublishResult{}, fmt.Errorf("ws: new id: %w", err)
		}
		o.ID = id.String()
	}
	f := &Frame{Op: OpPublish, Topic: topic, Payload: payload, Opts: &FrameOpts{
		ID: o.ID, Key: o.Key, Headers: o.Headers, Tags: o.Tags, CausedBy: o.CausedBy, SID: o.SID, TS: o.TS,
	}}
	sf, err := c.call(ctx, f, true)
	if err != nil {
		return PublishResult{}, err
	}
	return PublishResult{ID: sf.ID, Seq: sf.Seq}, nil
}

// Ack acks the delivery of id that the server sent last on this
// client's subscription of (topic, group). Prefer [Message.Ack], which
// names the attempt.
func (c *Client) Ack(ctx context.Context, topic, group, id string) error {
	_, err := c.call(ctx, &Frame{Op: OpAck, Topic: topic, Group: group, ID: id}, false)
	return err
}

// Nack nacks the delivery of id: it is delivered again after a backoff.
func (c *Client) Nack(ctx context.Context, topic, group, id, reason string) error {
	_, err := c.call(ctx, &Frame{Op: OpNack, Topic: topic, Group: group, ID: id, Reason: reason}, false)
	return err
}

// ModAck extends the lease of the delivery of id to now+extend. It fails
// with an error matching ErrUnknownID if the id is not in flight.
func (c *Client) ModAck(ctx context.Context, topic, group, id string, extend time.Duration) error {
	ms := max(extend.Milliseconds(), 1)
	_, err := c.call(ctx, &Frame{Op: OpModAck, Topic: topic, Group: group, ID: id, ExtendMS: &ms}, false)
	return err
}
