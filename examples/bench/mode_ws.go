package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/promethean/promlib/ws/wsclient"
)

func init() { modes["ws"] = runWS }

// runWS publishes and consumes through the WebSocket gateway over
// loopback. -publishers clients publish (pipelined with
// wsclient.Client.PublishAsync, -window in flight each; -sync: one
// Publish at a time) while -groups x -consumers clients subscribe with
// auto-ack: that gives publish_per_s, deliver_per_s, the latencies, lost
// and duplicates. Then one more client drains the n stored events from
// the earliest in a group of its own, each delivered and acked over the
// gateway: deliver_ack_per_s. In the same run it measures a raw
// coder/websocket JSON echo over one connection (raw_echo_per_s), the
// ceiling of the transport, with as many messages outstanding as the
// drain has in flight; deliver_over_echo is the ratio of the two.
func runWS(ctx context.Context, o *Options, be Backend, r *Result) error {
	bus, err := event.NewBus(be.Store, event.Config{Partitions: o.Partitions, PollInterval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = bus.Close(cctx)
	}()
	if !o.Sync {
		r.Window = wsWindow(o)
	}
	gw, err := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("bench"), MaxInFlight: o.MaxInFlight})
	if err != nil {
		return err
	}
	url, stop, err := serveLoopback(gw)
	if err != nil {
		return err
	}
	defer stop()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = gw.Shutdown(cctx)
	}()

	dial := func() (*wsclient.Client, error) {
		return wsclient.Dial(ctx, url, &wsclient.Options{Token: "bench", DisableReconnect: true, PublishWindow: wsWindow(o)})
	}
	var clients []*wsclient.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	t := newTally(o.N, o.Groups)
	for g := range o.Groups {
		for range o.Consumers {
			c, err := dial()
			if err != nil {
				return err
			}
			clients = append(clients, c)
			_, err = c.Subscribe(ctx, benchTopic, "bench-"+strconv.Itoa(g), func(ctx context.Context, m *wsclient.Message) error {
				if i, ok := payloadIndex(m.Payload); ok {
					t.delivered(g, i)
				}
				return nil
			}, event.FromLatest(), event.WithMaxInFlight(o.MaxInFlight))
			if err != nil {
				return err
			}
		}
	}

	start := time.Now()
	t.start = start
	var wg sync.WaitGroup
	errs := make(chan error, o.Publishers)
	per := (o.N + o.Publishers - 1) / o.Publishers
	for p := range o.Publishers {
		c, err := dial()
		if err != nil {
			return err
		}
		clients = append(clients, c)
		lo, hi := p*per, min((p+1)*per, o.N)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := wsPublish(ctx, o, c, t, lo, hi); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	pubDur := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if err := t.finish(ctx, o, start, pubDur, r); err != nil {
		return err
	}

	drain, err := wsDrain(ctx, dial, o)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	r.DeliverAckPerS = drain
	echo, err := rawEcho(ctx, min(o.N, 200_000), o.Payload, o.MaxInFlight)
	if err != nil {
		return fmt.Errorf("raw echo baseline: %w", err)
	}
	r.RawEchoPerS = echo
	if echo > 0 {
		r.WSOverEcho = drain / echo
	}
	return nil
}

// wsPublish publishes the events lo..hi-1 through c: pipelined, each
// result checked in order, or one at a time with -sync.
func wsPublish(ctx context.Context, o *Options, c *wsclient.Client, t *tally, lo, hi int) error {
	pace := newPacer(o, t, lo)
	if o.Sync {
		for i := lo; i < hi; i++ {
			if err := pace.wait(ctx, i); err != nil {
				return err
			}
			if _, err := c.Publish(ctx, benchTopic, makePayload(i, o.Payload)); err != nil {
				return fmt.Errorf("publish %d: %w", i, err)
			}
		}
		return nil
	}
	window := wsWindow(o)
	ring := make([]*wsclient.PublishFuture, window)
	check := func(i int) error {
		f := ring[(i-lo)%window]
		if f == nil {
			return nil
		}
		if _, err := f.Get(ctx); err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
		return nil
	}
	for i := lo; i < hi; i++ {
		if i-lo >= window {
			if err := check(i - window); err != nil {
				return err
			}
		}
		if err := pace.wait(ctx, i); err != nil {
			return err
		}
		ring[(i-lo)%window] = c.PublishAsync(ctx, benchTopic, makePayload(i, o.Payload))
	}
	for i := max(lo, hi-window); i < hi; i++ {
		if err := check(i); err != nil {
			return err
		}
	}
	return nil
}

// wsDrain subscribes a new group from the earliest and returns the rate at
// which the n stored events are delivered and acked.
func wsDrain(ctx context.Context, dial func() (*wsclient.Client, error), o *Options) (float64, error) {
	c, err := dial()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var got atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	_, err = c.Subscribe(ctx, benchTopic, "bench-drain", func(ctx context.Context, m *wsclient.Message) error {
		if got.Add(1) == int64(o.N) {
			close(done)
		}
		return nil
	}, event.FromEarliest(), event.WithMaxInFlight(o.MaxInFlight))
	if err != nil {
		return 0, err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("%d of %d delivered in 5 minutes", got.Load(), o.N)
	}
	return float64(o.N) / time.Since(start).Seconds(), nil
}

// serveLoopback serves h on a free loopback port.
func serveLoopback(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return "ws://" + ln.Addr().String(), func() { _ = srv.Close(); <-done }, nil
}

// echoMsg is the raw baseline's message: JSON decoded and encoded again by
// the server, as the gateway does with frames.
type echoMsg struct {
	Op      string          `json:"op"`
	I       int             `json:"i"`
	Payload json.RawMessage `json:"payload"`
}

// rawEcho measures messages per second through a bare coder/websocket
// server that decodes each JSON message and writes it back, over one
// loopback connection with up to window messages outstanding.
func rawEcho(ctx context.Context, n, payload, window int) (float64, error) {
	url, stop, err := serveLoopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		for {
			_, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			var m echoMsg
			if err := json.Unmarshal(data, &m); err != nil {
				return
			}
			out, _ := json.Marshal(&m)
			if err := c.Write(r.Context(), websocket.MessageText, out); err != nil {
				return
			}
		}
	}))
	if err != nil {
		return 0, err
	}
	defer stop()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return 0, err
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)

	credit := make(chan struct{}, window)
	for range window {
		credit <- struct{}{}
	}
	p := makePayload(0, payload)
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		for i := range n {
			select {
			case <-credit:
			case <-ctx.Done():
				werr <- ctx.Err()
				return
			}
			data, _ := json.Marshal(&echoMsg{Op: "ECHO", I: i, Payload: p})
			if err := c.Write(ctx, websocket.MessageText, data); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	for got := 0; got < n; got++ {
		_, data, err := c.Read(ctx)
		if err != nil {
			return 0, err
		}
		var m echoMsg
		if err := json.Unmarshal(data, &m); err != nil || m.I < 0 {
			return 0, errors.Join(errors.New("bad echo"), err)
		}
		credit <- struct{}{}
	}
	el := time.Since(start)
	if err := <-werr; err != nil {
		return 0, err
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
	return float64(n) / el.Seconds(), nil
}

// wsWindow is the publish window of the WebSocket client: -window, or the
// client's default.
func wsWindow(o *Options) int {
	if o.Window > 0 {
		return o.Window
	}
	return wsclient.DefaultPublishWindow
}
