package ws

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stalledClient is a WebSocket client written by hand over TCP, with a
// tiny receive buffer, that authenticates, subscribes and then never reads
// again: the gateway's writes to it block once the socket is full.
func (e *testEnv) stalledClient(topic, group string) net.Conn {
	e.t.Helper()
	conn, _ := e.stalledClientWith(`{"op":"SUBSCRIBE","topic":"` + topic + `","group":"` + group + `","corr":"s"}`)
	return conn
}

// stalledClientWith is stalledClient with the given SUBSCRIBE frame; it
// returns the reader to read the connection with, should the test read
// again.
func (e *testEnv) stalledClientWith(subscribe string) (net.Conn, *bufio.Reader) {
	e.t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", e.srv.Listener.Addr().String())
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", e.srv.Listener.Addr())
	require.NoError(e.t, err)
	require.NoError(e.t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(e.t, err)
	require.Equal(e.t, http.StatusSwitchingProtocols, resp.StatusCode)

	for _, f := range []string{
		`{"op":"AUTH","token":"` + testToken + `","corr":"a"}`,
		subscribe,
	} {
		_, err := conn.Write(maskedTextFrame([]byte(f)))
		require.NoError(e.t, err)
		require.Contains(e.t, string(readServerFrame(e.t, br)), `"op":"OK"`)
	}
	require.NoError(e.t, conn.SetReadDeadline(time.Time{}))
	return conn, br // and never read again (unless the test does)
}

// maskedTextFrame is a client text frame (masked with the zero key).
func maskedTextFrame(p []byte) []byte {
	b := []byte{0x81}
	if n := len(p); n < 126 {
		b = append(b, 0x80|byte(n))
	} else {
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	}
	b = append(b, 0, 0, 0, 0)
	return append(b, p...)
}

// readServerFrame reads one unmasked, unfragmented server frame.
func readServerFrame(t *testing.T, r io.Reader) []byte {
	t.Helper()
	_, p := readServerFrameOp(t, r)
	return p
}

// readServerFrameOp reads one unmasked, unfragmented server frame and
// returns its opcode too (1 text, 8 close).
func readServerFrameOp(t *testing.T, r io.Reader) (byte, []byte) {
	t.Helper()
	var h [2]byte
	_, err := io.ReadFull(r, h[:])
	require.NoError(t, err)
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		_, err = io.ReadFull(r, l[:])
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		_, err = io.ReadFull(r, l[:])
		n = binary.BigEndian.Uint64(l[:])
	}
	require.NoError(t, err)
	p := make([]byte, n)
	_, err = io.ReadFull(r, p)
	require.NoError(t, err)
	return h[0] & 0x0f, p
}

// publishBig publishes n events of about 256 KiB each and returns their ids.
func (e *testEnv) publishBig(topic string, n int) map[string]bool {
	e.t.Helper()
	payload := []byte(`"` + strings.Repeat("x", 256<<10) + `"`)
	ids := make(map[string]bool, n)
	for range n {
		rec, err := e.bus.Publish(context.Background(), topic, payload)
		require.NoError(e.t, err)
		ids[rec.ID] = true
	}
	return ids
}

// A client that stops reading is closed with wsproto.CloseWriteTimeout once a
// write to it has waited WriteTimeout, and its in-flight events go back
// to the group at once: another subscriber gets every event although the
// leases (an hour) are far from over.
func TestWriteTimeout(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	e := newEnv(t, func(c *Config) {
		c.WriteTimeout = 5 * time.Second // long enough for a reader under -race on a busy machine
		c.AckTimeout = time.Hour
		c.PingInterval = -1 // only the write deadline can notice the stall
		c.Observer = obs
	})
	e.stalledClient("t", "g")
	ids := e.publishBig("t", 40)

	r := e.authed()
	r.subscribe("t", "g", "s", nil)
	got := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(got) < len(ids) {
		select {
		case m := <-r.rd:
			require.NoError(t, m.err)
			var f struct {
				Op    string
				Event struct{ ID string }
			}
			require.NoError(t, decodeJSON(strings.NewReader(string(m.data)), &f))
			if f.Op == "EVENT" {
				got[f.Event.ID] = true
				r.send(ack("ACK", "t", "g", f.Event.ID, ""))
			}
		case <-deadline:
			t.Fatalf("the second subscriber got %d of %d events; closes seen by the gateway: %v", len(got), len(ids), obs.closed())
		}
	}
	assert.Equal(t, ids, got)
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int{wsproto.CloseWriteTimeout}, obs.closed()) },
		10*time.Second, 10*time.Millisecond, "closes: %v", obs.closed())
}

// Pings do not wait for a writer blocked on a client that does not read:
// with no write deadline to speak of, the ping timeout still closes it.
func TestPingsNotStarvedByBlockedWriter(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	e := newEnv(t, func(c *Config) {
		c.WriteTimeout = time.Hour
		c.PingInterval = 200 * time.Millisecond
		c.PingTimeout = 200 * time.Millisecond
		c.Observer = obs
	})
	e.stalledClient("t", "g")
	e.publishBig("t", 40)
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int{wsproto.ClosePingTimeout}, obs.closed()) },
		10*time.Second, 10*time.Millisecond, "closes: %v", obs.closed())
}
