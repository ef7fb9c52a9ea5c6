package wsclient

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/stretchr/testify/require"
)

const testToken = "s3cret"

// testEnv is a bus and a gateway (auth.StaticTokens(testToken)) on a loopback
// HTTP server, for the client to talk to.
type testEnv struct {
	t   *testing.T
	bus *event.Bus
	url string

	mu    sync.Mutex
	conns []net.Conn // the sockets the gateway took over
}

// newEnv starts the environment; mod may change the gateway's config (its
// Clock is the bus's too). All is stopped at cleanup.
func newEnv(t *testing.T, mod func(*ws.Config)) *testEnv {
	t.Helper()
	cfg := ws.Config{Verifier: auth.StaticTokens(testToken)}
	if mod != nil {
		mod(&cfg)
	}
	// The bus and its store tell the time by the gateway's clock.
	store := event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: cfg.Clock})
	bus, err := event.NewBus(store, event.Config{CommitInterval: 10 * time.Millisecond, Clock: cfg.Clock})
	require.NoError(t, err)
	cfg.Bus = bus
	gw, err := ws.NewGateway(cfg)
	require.NoError(t, err)
	e := &testEnv{t: t, bus: bus}
	srv := httptest.NewUnstartedServer(gw)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
		}
	}
	srv.Start()
	e.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, gw.Shutdown(ctx))
		srv.Close()
		require.NoError(t, bus.Close(ctx))
	})
	return e
}

// client dials the gateway (with testToken and short backoffs unless opts
// is set); it is closed at cleanup.
func (e *testEnv) client(opts *Options) *Client {
	e.t.Helper()
	o := Options{Token: testToken, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	if opts != nil {
		o = *opts
	}
	c, err := Dial(context.Background(), e.url, &o)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { require.NoError(e.t, c.Close()) })
	return c
}

// dropConnections cuts every connection to the gateway, as a network
// failure would.
func (e *testEnv) dropConnections() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.conns {
		_ = c.Close()
	}
	e.conns = nil
}
