package ws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/clientaddr"
	"github.com/promethean/promlib/ratelimit"
	"github.com/promethean/promlib/ws/internal/cork"
	"golang.org/x/time/rate"
)

// Gateway serves the WebSocket protocol of docs/PROTOCOL.md over a [event.Bus].
// It is an http.Handler: mount it where clients connect. All state is per
// connection (authentication, subscriptions, queues, buckets) except the
// per-topic publish buckets, which are shared on purpose.
type Gateway struct {
	cfg    Config
	bus    *event.Bus
	log    *slog.Logger
	obs    Observer
	topics *ratelimit.Keyed
	accept *websocket.AcceptOptions
	// failedAuth counts refused AUTH per client address (clients.Key).
	failedAuth *ratelimit.Keyed
	clients    *clientaddr.Resolver

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
	nextID atomic.Uint64
	nconns atomic.Int64 // len(conns), for the keeper

	// The topics followed for live subscribers (live.go): a reader each.
	lmu   sync.Mutex
	feeds map[string]*topicFeed
	lwg   sync.WaitGroup

	// The keeper (keeper.go): every connection's deadlines.
	kmu     sync.Mutex
	due     deadlines
	keeping bool // keep runs
	kwake   chan struct{}
	kwg     sync.WaitGroup
}

// NewGateway returns a gateway; cfg is copied.
func NewGateway(cfg Config) (*Gateway, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.OriginPatterns = append([]string(nil), cfg.OriginPatterns...)
	topics, err := ratelimit.NewKeyed(ratelimit.KeyedConfig{
		Limit: cfg.RateLimits.TopicPublish, MaxKeys: cfg.RateLimits.MaxTopics, Clock: cfg.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("ws: topic rate limit: %w", err)
	}
	failedAuth, err := ratelimit.NewKeyed(ratelimit.KeyedConfig{Limit: cfg.FailedAuthLimit, Clock: cfg.Clock})
	if err != nil {
		return nil, fmt.Errorf("ws: failed AUTH limit: %w", err)
	}
	cfg.TrustedProxies = append([]netip.Prefix(nil), cfg.TrustedProxies...)
	return &Gateway{
		cfg:        cfg,
		bus:        cfg.Bus,
		log:        cfg.Logger,
		obs:        cfg.Observer,
		topics:     topics,
		accept:     &websocket.AcceptOptions{OriginPatterns: cfg.OriginPatterns},
		failedAuth: failedAuth,
		clients:    clientaddr.New(cfg.TrustedProxies),
		conns:      make(map[*conn]struct{}),
		feeds:      make(map[string]*topicFeed),
		kwake:      make(chan struct{}, 1),
	}, nil
}

// ServeHTTP upgrades the request to a WebSocket connection, which the
// gateway then serves in a goroutine of its own until it ends
// ([Gateway.Shutdown] waits for it); ServeHTTP returns after the upgrade,
// so that the HTTP server's request state (its buffers, the request) is
// freed rather than kept for the connection's life. A request that is not
// a WebSocket upgrade gets 426.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		http.Error(w, "ws: gateway shutting down", http.StatusServiceUnavailable)
		return
	}
	select {
	case <-g.bus.Done():
		http.Error(w, "ws: the bus is closed", http.StatusServiceUnavailable)
		return
	default:
	}
	var wire *wireReader
	cw := &cork.Writer{ResponseWriter: w, SourceBuffer: libReaderSize, Source: func(nc net.Conn, buffered []byte) io.Reader {
		if wire = newWireReader(nc, buffered); wire == nil {
			return nil
		}
		return wire
	}}
	ws, err := websocket.Accept(cw, r, g.accept)
	if err != nil {
		g.log.Debug("ws: upgrade failed", "remote", r.RemoteAddr, "err", err)
		return // Accept has answered the request
	}
	c := newConn(g, ws, r.RemoteAddr)
	if wire != nil {
		c.wire = wire
		wire.onPong = c.pongCame
	}
	c.cork = cw.Conn
	if c.cork != nil {
		c.cork.SetWriteTimeout(g.cfg.WriteTimeout)
	}
	c.client = g.clients.Key(r)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		_ = ws.Close(websocket.StatusGoingAway, "server shutting down")
		return
	}
	g.conns[c] = struct{}{}
	g.nconns.Add(1)
	g.wg.Add(1)
	g.mu.Unlock()
	go g.serveConn(c)
}

// serveConn serves c until it ends.
func (g *Gateway) serveConn(c *conn) {
	now := g.now()
	if !c.authNoToken() {
		g.schedule(c, dueAuth, now.Add(g.cfg.AuthTimeout))
	}
	if g.cfg.PingInterval > 0 {
		g.schedule(c, duePing, now.Add(g.cfg.PingInterval))
	}
	select {
	case <-g.bus.Done(): // closed since the check above; the keeper may have missed c
		c.spawn(func() { c.closeWith(wsproto.CloseGoingAway, "bus closed") })
	default:
	}
	c.serve()
}

// connGone forgets c, which has ended.
func (g *Gateway) connGone(c *conn) {
	g.mu.Lock()
	delete(g.conns, c)
	g.nconns.Add(-1)
	g.mu.Unlock()
	g.connEnded()
	g.wg.Done()
}

func (g *Gateway) connsSnapshot() []*conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	conns := make([]*conn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	return conns
}

// Shutdown stops accepting connections, closes every connection with
// wsproto.CloseGoingAway (their in-flight events go back to their groups) and
// waits for them to end until ctx ends; then it drops the rest. It does not
// close the Bus.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	conns := g.connsSnapshot()

	var closers sync.WaitGroup
	for _, c := range conns {
		closers.Add(1)
		go func() {
			defer closers.Done()
			c.closeWith(wsproto.CloseGoingAway, "server shutting down")
		}()
	}
	done := make(chan struct{})
	go func() {
		closers.Wait()
		g.wg.Wait()
		g.kwg.Wait() // the keeper stops with the last connection
		g.lwg.Wait() // a topic's reader with its last live subscriber
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, c := range conns {
		_ = c.ws.CloseNow()
	}
	<-done
	return fmt.Errorf("ws: shutdown: %w", ctx.Err())
}

// Stats is a snapshot of the gateway's connections. Its JSON keys are
// snake_case, as every JSON the library answers over HTTP.
type Stats struct {
	// Connections open now.
	Connections int `json:"connections"`
	// Authenticated connections among them.
	Authenticated int `json:"authenticated"`
	// Subscriptions held by all connections.
	Subscriptions int `json:"subscriptions"`
	// Queued frames waiting to be written, over all connections; each
	// connection holds at most Config.SendQueue.
	Queued int `json:"queued"`
	// MaxQueued is the fullest send queue of one connection.
	MaxQueued int `json:"max_queued"`
	// Leases are the deliveries sent or queued and not yet settled, over
	// all connections; each subscription holds at most its max in-flight.
	Leases int `json:"leases"`
	// Publishing are the PUBLISH frames read and not stored yet, over all
	// connections; each connection holds at most Config.PublishWindow.
	Publishing int `json:"publishing"`
}

// LiveStats is a snapshot of the gateway's live subscriptions (SUBSCRIBE
// without group). Its JSON keys are snake_case.
type LiveStats struct {
	// Subscriptions are the live subscriptions of all connections (counted
	// in Stats.Subscriptions too).
	Subscriptions int `json:"subscriptions"`
	// Queued are the frames of live subscriptions waiting to be written,
	// over all connections (counted in Stats.Queued too); each connection
	// holds at most Config.LiveQueueEvents.
	Queued int `json:"queued"`
	// Topics are the topics the gateway follows for live subscribers, one
	// reader each.
	Topics int `json:"topics"`
}

// LiveStats returns a snapshot of the gateway's live subscriptions.
func (g *Gateway) LiveStats() LiveStats {
	var st LiveStats
	for _, c := range g.connsSnapshot() {
		st.Subscriptions += len(c.liveSnapshot())
		st.Queued += c.liveQueued()
	}
	st.Topics = g.liveTopics()
	return st
}

// Stats returns a snapshot of the gateway's connections.
func (g *Gateway) Stats() Stats {
	conns := g.connsSnapshot()
	var st Stats
	st.Connections = len(conns)
	for _, c := range conns {
		if c.principal.Load() != nil {
			st.Authenticated++
		}
		if p := c.pub.Load(); p != nil {
			st.Publishing += p.Pending()
		}
		q := c.queued()
		st.Queued += q
		st.MaxQueued = max(st.MaxQueued, q)
		for _, s := range c.subsSnapshot() {
			st.Subscriptions++
			st.Leases += s.leaseCount()
		}
		st.Subscriptions += len(c.liveSnapshot())
	}
	return st
}

// now tells the time by the gateway's clock.
func (g *Gateway) now() time.Time { return g.cfg.Clock.Now() }

// waitToken takes a token of lim, waiting for it by the gateway's clock
// until ctx ends.
func (g *Gateway) waitToken(ctx context.Context, lim *rate.Limiter) error {
	now := g.now()
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return fmt.Errorf("ws: a burst of %d cannot pass one event", lim.Burst())
	}
	d := r.DelayFrom(now)
	if d == 0 {
		return nil
	}
	t := g.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.CancelAt(g.now())
		return ctx.Err()
	}
}

// errorOf maps an error to a protocol error with the given code, keeping a
// protocol error as it is and answering bad input with bad_frame, or
// bad_json when it is text a record may not hold (event.ErrBadJSON).
func errorOf(err error, code wsproto.Code) *wsproto.Error {
	var pe *wsproto.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, event.ErrClosed) {
		return wsproto.NewError(code, err, "the bus is closed")
	}
	var sv SchemaViolation
	if errors.As(err, &sv) {
		pointer, reason := sv.SchemaViolation()
		return wsproto.NewError(wsproto.CodeSchemaInvalid, err, "at %q: %s", pointer, reason)
	}
	if errors.Is(err, event.ErrBadJSON) {
		return wsproto.NewError(wsproto.CodeBadJSON, err, "%v", err)
	}
	if errors.Is(err, event.ErrInvalid) {
		return wsproto.NewError(wsproto.CodeBadFrame, err, "%v", err)
	}
	return wsproto.NewError(code, err, "%v", err)
}
