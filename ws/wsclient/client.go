package wsclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/google/uuid"
	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/internal/cork"
	"github.com/promethean/promlib/ws/internal/wsframe"
)

// Defaults of [Options].
const (
	DefaultMinBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff    = 10 * time.Second
	DefaultDialTimeout   = 10 * time.Second
	DefaultReadLimit     = 16 << 20
	DefaultPingInterval  = 30 * time.Second
	DefaultPublishWindow = 256
)

// Options configure a [Client]. The zero value of each field means
// its default. Options are copied by Dial.
type Options struct {
	// Token is sent with AUTH.
	Token string
	// TokenFunc, if set, is called for the token at every (re)connect,
	// instead of using Token; use it for tokens that expire. A connection
	// whose token expires is closed by the gateway (4401) and dialled again
	// with a fresh token; [Client.Auth] refreshes it without reconnecting.
	TokenFunc func(ctx context.Context) (string, error)
	// HTTPHeader and HTTPClient are used for the WebSocket handshake. For
	// wss:// to a server whose certificate a private CA signed, give an
	// HTTPClient whose http.Transport has a TLSClientConfig with RootCAs.
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
	// PublishWindow bounds the publishes of [Client.PublishAsync] sent and
	// not answered yet (default 256); at the bound PublishAsync waits for
	// an answer.
	PublishWindow int
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// Clock arms the pings, the reconnect backoff and the drain on Close,
	// and sets Message.Deadline; nil means the system clock.
	Clock clock.Clock
}

func (o *Options) setDefaults() {
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
		o.ReadLimit = DefaultReadLimit
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.PublishWindow <= 0 {
		o.PublishWindow = DefaultPublishWindow
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.Or(o.Clock)
}

// Client is a connection to a ws.Gateway (or any server of the protocol)
// that reconnects by itself. It is safe for concurrent use.
type Client struct {
	url  string
	opts Options
	log  *slog.Logger

	ctx    context.Context // the client's life
	cancel context.CancelFunc
	wg     sync.WaitGroup
	corr   atomic.Uint64
	gen    atomic.Uint64

	transport *http.Transport // ours, when opts has no HTTPClient
	lastCork  *cork.Conn      // the socket the transport dialled last

	mu      sync.Mutex
	cur     *clientConn // nil while disconnected
	changed chan struct{}
	lost    bool  // disconnected for good (DisableReconnect)
	lostErr error // what calls get then
	closed  bool
	subs    map[subKey]*Subscription
	live    map[string]*LiveSubscription // by topic

	async asyncState // of PublishAsync (publish.go)
}

// Dial connects to url (ws:// or wss://) and authenticates. It fails if
// the first connection or its AUTH fails; later losses are reconnected in
// the background unless opts.DisableReconnect.
func Dial(ctx context.Context, url string, opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
		o.HTTPHeader = opts.HTTPHeader.Clone()
	}
	o.setDefaults()
	c := &Client{url: url, opts: o, log: o.Logger, changed: make(chan struct{}), subs: make(map[subKey]*Subscription),
		live: make(map[string]*LiveSubscription)}
	c.async.window = make(chan struct{}, o.PublishWindow)
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
			cc := &cork.Conn{Conn: conn}
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
		cc, ch, closed, lost, lostErr := c.cur, c.changed, c.closed, c.lost, c.lostErr
		c.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case cc != nil && !cc.isDead():
			return cc, nil
		case lost:
			return nil, lostErr
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
func (c *Client) call(ctx context.Context, f *wsframe.Frame, retry bool) (*wsframe.ServerFrame, error) {
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
			<-cc.done // the reader has seen how the connection ended
			return nil, disconnected(cc.closeError())
		}
	}
}

// route hands an EVENT to its subscription.
func (c *Client) route(cc *clientConn, f *wsframe.ServerFrame) {
	if f.Event == nil {
		c.log.Warn("wsclient: EVENT without event", "topic", f.Topic, "group", f.Group)
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
		Deadline: c.opts.Clock.Now().Add(time.Duration(f.Ctx.AckDeadlineMS) * time.Millisecond),
		sub:      s,
		cc:       cc,
	})
}

// subscriptionEnded ends the subscription an ERR without corr names: the
// server ended it (a re-AUTH whose token may not hold it).
func (c *Client) subscriptionEnded(f *wsframe.ServerFrame) {
	c.mu.Lock()
	s := c.subs[subKey{f.Topic, f.Group}]
	c.mu.Unlock()
	c.log.Warn("wsclient: subscription ended by the server", "topic", f.Topic, "group", f.Group, "code", f.Code, "msg", f.Msg)
	if s != nil {
		s.end(f.Err())
	}
}

// Auth sends AUTH with token on the live connection (waiting for one if
// the client is reconnecting), to refresh a token before it expires: the
// connection and its subscriptions stay. The server refuses a token for
// another subject than the connection's (an error matching
// [wsproto.ErrAuthFailed]) and keeps the previous token; subscriptions the new
// token may not hold end, with an error matching [wsproto.ErrForbidden] (see
// [Subscription.Err]). Once accepted, the token is also the one sent when
// the client reconnects, unless Options.TokenFunc is set.
func (c *Client) Auth(ctx context.Context, token string) error {
	if _, err := c.call(ctx, &wsframe.Frame{Op: wsproto.OpAuth, Token: token}, false); err != nil {
		return err
	}
	c.mu.Lock()
	c.opts.Token = token
	c.mu.Unlock()
	return nil
}

// Close ends the client: subscriptions stop (running handlers may finish,
// up to their drain timeout; those of live subscriptions are waited for),
// and the connection is closed, which gives every in-flight event back to
// its group. Close is idempotent.
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
	live := make([]*LiveSubscription, 0, len(c.live))
	for _, s := range c.live {
		live = append(live, s)
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.stop(ErrClosed)
	}
	for _, s := range live {
		s.stop(ErrClosed)
	}
	c.cancel()
	c.wg.Wait()
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
	return nil
}

// Publish publishes payload (one JSON value, or bytes of the content type
// that [event.WithContentType] gives: they go out in base64 with
// payload_encoding "base64") to topic and waits for the server's OK.
// Without an id in opts the client makes one (a UUIDv7), so
// that a publish cut off by a lost connection is sent again after the
// reconnect without being stored twice. To keep many publishes in flight,
// use [Client.PublishAsync].
func (c *Client) Publish(ctx context.Context, topic string, payload []byte, opts ...event.PublishOption) (wsproto.Published, error) {
	f, err := publishFrame(topic, payload, opts)
	if err != nil {
		return wsproto.Published{}, err
	}
	sf, err := c.call(ctx, f, true)
	if err != nil {
		return wsproto.Published{}, err
	}
	return wsproto.Published{ID: sf.ID, Seq: sf.Seq}, nil
}

// publishFrame checks a publish and makes its frame, with an id.
func publishFrame(topic string, payload []byte, opts []event.PublishOption) (*wsframe.Frame, error) {
	var o event.PublishOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := event.ValidateTopic(topic); err != nil {
		return nil, err
	}
	// The server refuses what event.ValidatePayloadAs and
	// PublishOptions.Validate refuse (bad JSON, invalid UTF-8, nesting
	// deeper than event.MaxJSONDepth): say so before sending it.
	if err := errors.Join(event.ValidatePayloadAs(payload, o.ContentType), o.Validate()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if o.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("wsclient: new id: %w", err)
		}
		o.ID = id.String()
	}
	f := &wsframe.Frame{Op: wsproto.OpPublish, Topic: topic, Payload: payload, Opts: &wsframe.FrameOpts{
		ID: o.ID, Key: o.Key, Headers: o.Headers, Tags: o.Tags, CausedBy: o.CausedBy, SID: o.SID, TS: o.TS,
		ContentType: o.ContentType,
	}}
	if !event.IsJSONContentType(o.ContentType) {
		f.Payload = wsframe.AppendBase64String(nil, payload)
		f.PayloadEncoding = event.PayloadEncodingBase64
	}
	return f, nil
}

// Ack acks the delivery of id that the server sent last on this
// client's subscription of (topic, group). Prefer [Message.Ack], which
// names the attempt.
func (c *Client) Ack(ctx context.Context, topic, group, id string) error {
	_, err := c.call(ctx, &wsframe.Frame{Op: wsproto.OpAck, Topic: topic, Group: group, ID: id}, false)
	return err
}

// Nack nacks the delivery of id: it is delivered again after a backoff.
func (c *Client) Nack(ctx context.Context, topic, group, id, reason string) error {
	_, err := c.call(ctx, &wsframe.Frame{Op: wsproto.OpNack, Topic: topic, Group: group, ID: id, Reason: reason}, false)
	return err
}

// ModAck extends the lease of the delivery of id to now+extend. It fails
// with an error matching wsproto.ErrUnknownID if the id is not in flight.
func (c *Client) ModAck(ctx context.Context, topic, group, id string, extend time.Duration) error {
	ms := max(extend.Milliseconds(), 1)
	_, err := c.call(ctx, &wsframe.Frame{Op: wsproto.OpModAck, Topic: topic, Group: group, ID: id, ExtendMS: &ms}, false)
	return err
}
