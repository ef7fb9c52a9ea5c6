package ws

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsproto"
)

// TestClientPingAnswered: a client's own ping goes to the websocket
// library, which answers it, where the peer's pongs are taken off the
// stream (wire.go): the client's Ping returns, and the connection goes on.
func TestClientPingAnswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 3 {
		require.NoError(t, r.c.Ping(ctx))
	}
	r.publish("t", 1, "p")
}

// TestGatewayOverTLS: over TLS the socket under the WebSocket connection
// is not one the wire reader reads (wire.go), and the websocket library
// reads it as it would: frames, live events, the gateway's pings and a
// client's, and the ping timeout of a client that does not answer.
func TestGatewayOverTLS(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	gw, err := NewGateway(Config{
		Bus: bus, Verifier: auth.StaticTokens(testToken), Observer: obs,
		PingInterval: 100 * time.Millisecond, PingTimeout: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	srv := httptest.NewTLSServer(gw)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, gw.Shutdown(ctx))
		srv.Close()
		require.NoError(t, bus.Close(ctx))
	})
	url := "wss" + strings.TrimPrefix(srv.URL, "https")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func() *websocket.Conn {
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: srv.Client()})
		require.NoError(t, err)
		t.Cleanup(func() { c.CloseNow() })
		return c
	}

	// A client that never reads never answers: ping timeout.
	mute := dial()
	require.NoError(t, mute.Write(ctx, websocket.MessageText, []byte(`{"op":"AUTH","token":"`+testToken+`"}`)))
	require.Eventually(t, func() bool { return len(obs.closed()) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []int{wsproto.ClosePingTimeout}, obs.closed())

	// A client that reads gets its frames, answers the pings, and has its
	// own pings answered.
	c := dial()
	frames := make(chan string, 16)
	go func() {
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				close(frames)
				return
			}
			frames <- string(data)
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case f, ok := <-frames:
			require.True(t, ok, "connection ended")
			return f
		case <-ctx.Done():
			t.Fatal("no frame")
			return ""
		}
	}
	for _, f := range []string{`{"op":"AUTH","token":"` + testToken + `","corr":"a"}`, `{"op":"SUBSCRIBE","topic":"tls","corr":"s"}`} {
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(f)))
		assert.Contains(t, next(), `"op":"OK"`)
	}
	require.NoError(t, c.Ping(ctx))
	_, err = bus.Publish(ctx, "tls", []byte(`"hello"`))
	require.NoError(t, err)
	assert.Contains(t, next(), `"payload":"hello"`)
	assert.Never(t, func() bool { return len(obs.closed()) > 1 }, 500*time.Millisecond, 20*time.Millisecond, "several ping rounds pass")
	require.NoError(t, c.Ping(ctx))
}
