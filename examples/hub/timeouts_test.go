package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/ws/wsclient"
)

// closedWithin reports whether the server closes c within d: a read
// returns EOF or a reset, not the test's own deadline.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	_, err := io.Copy(io.Discard, c) // the server's 408 or nothing, then the close
	var ne net.Error
	if err != nil && assert.ErrorAs(t, err, &ne) && ne.Timeout() {
		return false // our deadline: the server kept the connection
	}
	return true
}

// Idle keep-alive connections and bodies that trickle in are cut off, so
// that clients that send nothing cannot hold file descriptors for ever; a
// WebSocket connection is not cut off by those timeouts.
func TestHubTimeoutsBoundEveryWait(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond
	addr, _, stop := runHub(t, nil, "-read-timeout", limit.String(), "-idle-timeout", limit.String(), "-write-timeout", limit.String())
	t.Cleanup(stop)

	t.Run("trickling body", func(t *testing.T) {
		t.Parallel()
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "POST /publish/t HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		require.NoError(t, err)
		stopTrickle := make(chan struct{})
		defer close(stopTrickle)
		go func() { // one byte every 50ms: never done within the read timeout
			for {
				select {
				case <-stopTrickle:
					return
				case <-time.After(50 * time.Millisecond):
					if _, err := io.WriteString(c, " "); err != nil {
						return
					}
				}
			}
		}()
		assert.True(t, closedWithin(t, c, 20*limit), "a trickling body holds its connection")
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		t.Parallel()
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.True(t, closedWithin(t, c, 20*limit), "an idle keep-alive connection is kept")
	})

	t.Run("websocket outlives them", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		c, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{DisableReconnect: true})
		require.NoError(t, err)
		defer c.Close()
		got := make(chan string, 1)
		_, err = c.Subscribe(ctx, "late", "g", func(_ context.Context, m *wsclient.Message) error {
			got <- string(m.Payload)
			return nil
		})
		require.NoError(t, err)
		// Longer than every HTTP timeout of the server, idle.
		time.Sleep(3 * limit)
		_, err = c.Publish(ctx, "late", []byte(`"still here"`))
		require.NoError(t, err)
		select {
		case p := <-got:
			assert.Equal(t, `"still here"`, p)
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery on a connection older than the HTTP timeouts")
		}
	})
}
