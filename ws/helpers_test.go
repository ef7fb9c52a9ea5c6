package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
	"github.com/stretchr/testify/require"
)

const testToken = "s3cret"

// failingStore is a memory store whose Append fails while fail is set,
// and for any batch that holds the payload "poison". It counts its
// appends and their largest batch, and while gate holds a channel, Append waits for it to close.
type failingStore struct {
	*event.MemoryStore
	fail    atomic.Bool
	appends atomic.Int64
	largest atomic.Int64 // the most records of one append
	gate    atomic.Pointer[chan struct{}]
	// readGate, while it holds a channel, makes Read wait for it to close.
	readGate atomic.Pointer[chan struct{}]
	reads    atomic.Int64
}

func (s *failingStore) Read(ctx context.Context, topic string, after uint64, limit int) ([]event.Record, error) {
	s.reads.Add(1)
	if g := s.readGate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.MemoryStore.Read(ctx, topic, after, limit)
}

// ReadInto goes through Read: the embedded store's would skip the gate.
func (s *failingStore) ReadInto(ctx context.Context, topic string, after uint64, limit int, buf []event.Record) ([]event.Record, error) {
	recs, err := s.Read(ctx, topic, after, limit)
	return append(buf, recs...), err
}

func (s *failingStore) Append(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
	s.appends.Add(1)
	for n := int64(len(recs)); ; {
		if l := s.largest.Load(); n <= l || s.largest.CompareAndSwap(l, n) {
			break
		}
	}
	if g := s.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.fail.Load() {
		return nil, errors.New("disk on fire")
	}
	for _, r := range recs {
		if string(r.Payload) == `"poison"` {
			return nil, errors.New("poison refused")
		}
	}
	return s.MemoryStore.Append(ctx, topic, recs)
}

type testEnv struct {
	t     *testing.T
	store *failingStore
	bus   *event.Bus
	gw    *Gateway
	srv   *httptest.Server
	url   string
}

// newEnv starts a bus, a gateway (auth.StaticTokens(testToken) unless mod
// sets a verifier) and an HTTP server on loopback, all stopped at cleanup.
// The bus and its store tell the time by the gateway's Config.Clock, as
// Config.Clock asks.
func newEnv(t *testing.T, mod func(*Config)) *testEnv {
	t.Helper()
	cfg := Config{Verifier: auth.StaticTokens(testToken)}
	if mod != nil {
		mod(&cfg)
	}
	return startEnv(t, cfg, cfg.Clock)
}

// startEnv starts a bus on busClock, the gateway of cfg over it and an
// HTTP server on loopback, all stopped at cleanup.
func startEnv(t *testing.T, cfg Config, busClock clock.Clock) *testEnv {
	t.Helper()
	return startEnvWith(t, cfg, busClock, 0)
}

// newSmallEnv is newEnv with the server's socket send buffers set to
// sndbuf bytes, so that a client that stops reading blocks the gateway's
// writes to it after little data.
func newSmallEnv(t *testing.T, sndbuf int, mod func(*Config)) *testEnv {
	t.Helper()
	cfg := Config{Verifier: auth.StaticTokens(testToken)}
	if mod != nil {
		mod(&cfg)
	}
	return startEnvWith(t, cfg, cfg.Clock, sndbuf)
}

// startEnvWith is startEnv with the server's socket send buffers set to
// sndbuf bytes (0: the system's).
func startEnvWith(t *testing.T, cfg Config, busClock clock.Clock, sndbuf int) *testEnv {
	t.Helper()
	store := &failingStore{MemoryStore: event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: busClock})}
	bus, err := event.NewBus(store, event.Config{CommitInterval: 10 * time.Millisecond, Clock: busClock})
	require.NoError(t, err)
	cfg.Bus = bus
	gw, err := NewGateway(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /publish/{topic}", gw.PublishHandler())
	mux.Handle("/", gw)
	srv := httptest.NewUnstartedServer(mux)
	if sndbuf > 0 {
		srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
			if tc, ok := c.(*net.TCPConn); ok && s == http.StateNew {
				_ = tc.SetWriteBuffer(sndbuf)
			}
		}
	}
	srv.Start()
	e := &testEnv{t: t, store: store, bus: bus, gw: gw, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http")}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, gw.Shutdown(ctx))
		srv.Close()
		require.NoError(t, bus.Close(ctx))
	})
	return e
}

// raw is a client that speaks the protocol by hand, as a client written
// from the seed documents would.
type raw struct {
	t  *testing.T
	c  *websocket.Conn
	rd chan rawMsg
}

type rawMsg struct {
	data []byte
	err  error
}

// frame is a decoded server frame.
type frame map[string]any

func (f frame) str(k string) string { s, _ := f[k].(string); return s }
func (f frame) num(k string) float64 {
	n, _ := f[k].(float64)
	return n
}
func (f frame) obj(k string) frame { m, _ := f[k].(map[string]any); return m }

func (e *testEnv) dial() *raw {
	e.t.Helper()
	return e.dialWith(nil)
}

// dialWith dials the gateway with the given request headers and reads
// every frame into the returned raw client.
func (e *testEnv) dialWith(h http.Header) *raw {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: h})
	require.NoError(e.t, err)
	c.SetReadLimit(-1)
	r := &raw{t: e.t, c: c, rd: make(chan rawMsg, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, data, err := c.Read(context.Background())
			r.rd <- rawMsg{data, err}
			if err != nil {
				return
			}
		}
	}()
	e.t.Cleanup(func() {
		_ = c.CloseNow()
		for {
			select {
			case <-r.rd:
				continue
			case <-done:
			}
			return
		}
	})
	return r
}

// authed dials and authenticates.
func (e *testEnv) authed() *raw {
	r := e.dial()
	r.send(`{"op":"AUTH","token":"` + testToken + `","corr":"auth"}`)
	r.expectOK("auth")
	return r
}

func (r *raw) send(v any) {
	r.t.Helper()
	var data []byte
	switch v := v.(type) {
	case string:
		data = []byte(v)
	case []byte:
		data = v
	default:
		var err error
		data, err = json.Marshal(v)
		require.NoError(r.t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(r.t, r.c.Write(ctx, websocket.MessageText, data))
}

// recv returns the next frame, failing the test after d.
func (r *raw) recvWithin(d time.Duration) frame {
	r.t.Helper()
	select {
	case m := <-r.rd:
		require.NoError(r.t, m.err, "connection ended")
		var f frame
		require.NoError(r.t, json.Unmarshal(m.data, &f), "server sent bad JSON: %s", m.data)
		return f
	case <-time.After(d):
		r.t.Fatalf("no frame within %v", d)
		return nil
	}
}

func (r *raw) recv() frame { r.t.Helper(); return r.recvWithin(5 * time.Second) }

// expectOK reads the next frame and checks it is OK with the given corr.
func (r *raw) expectOK(corr string) frame {
	r.t.Helper()
	f := r.recv()
	require.Equal(r.t, "OK", f.str("op"), "want OK for %q, got %v", corr, f)
	require.Equal(r.t, corr, f.str("corr"))
	return f
}

// expectErr reads the next frame and checks it is ERR with code and corr.
func (r *raw) expectErr(code wsproto.Code, corr string) frame {
	r.t.Helper()
	f := r.recv()
	require.Equal(r.t, "ERR", f.str("op"), "want ERR %s for %q, got %v", code, corr, f)
	require.Equal(r.t, string(code), f.str("code"), "msg: %s", f.str("msg"))
	require.Equal(r.t, corr, f.str("corr"))
	require.NotEmpty(r.t, f.str("msg"))
	return f
}

// expectClose waits for the server to close the connection and returns
// the close status.
func (r *raw) expectClose(within time.Duration) websocket.CloseError {
	r.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m := <-r.rd:
			if m.err == nil {
				continue
			}
			var ce websocket.CloseError
			require.True(r.t, errors.As(m.err, &ce), "want a close frame, got %v", m.err)
			return ce
		case <-deadline:
			r.t.Fatalf("connection not closed within %v", within)
		}
	}
}

// expectEvent reads the next frame and checks it is an EVENT.
func (r *raw) expectEvent() frame {
	r.t.Helper()
	f := r.recv()
	require.Equal(r.t, "EVENT", f.str("op"), "want EVENT, got %v", f)
	return f
}

// noFrameFor checks that nothing arrives for d.
func (r *raw) noFrameFor(d time.Duration) {
	r.t.Helper()
	select {
	case m := <-r.rd:
		r.t.Fatalf("unexpected frame %s (err %v)", m.data, m.err)
	case <-time.After(d):
	}
}

func (r *raw) subscribe(topic, group, corr string, opts map[string]any) {
	r.t.Helper()
	f := map[string]any{"op": "SUBSCRIBE", "topic": topic, "group": group, "corr": corr}
	if opts != nil {
		f["opts"] = opts
	}
	r.send(f)
	r.expectOK(corr)
}

func (r *raw) publish(topic string, payload any, corr string) frame {
	r.t.Helper()
	r.send(map[string]any{"op": "PUBLISH", "topic": topic, "payload": payload, "corr": corr})
	return r.expectOK(corr)
}

func ack(op, topic, group, id, corr string) string {
	return fmt.Sprintf(`{"op":%q,"topic":%q,"group":%q,"id":%q,"corr":%q}`, op, topic, group, id, corr)
}

// client dials the gateway with the Go client (with testToken and short
// backoffs unless opts is set); it is closed at cleanup.
func (e *testEnv) client(opts *wsclient.Options) *wsclient.Client {
	e.t.Helper()
	o := wsclient.Options{Token: testToken, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	if opts != nil {
		o = *opts
	}
	c, err := wsclient.Dial(context.Background(), e.url, &o)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { require.NoError(e.t, c.Close()) })
	return c
}

func newRequest(url, token, body string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
