package ws

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maskedText is a client's masked text frame carrying payload.
func maskedText(payload string) []byte {
	mask := [4]byte{1, 2, 3, 4}
	b := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	default:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	}
	b = append(b, mask[:]...)
	for i := range len(payload) {
		b = append(b, payload[i]^mask[i%4])
	}
	return b
}

// A client that sends its first frames in the same write as its upgrade
// request, without waiting for the answer, loses none of them: the bytes
// the server read past the request stay with the connection, whatever
// reader the gateway gives it. The second frame is larger than that
// reader's buffer.
func TestFramesSentWithTheUpgrade(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))

	big := `{"op":"PUBLISH","topic":"t","payload":"` + strings.Repeat("x", 3000) + `","corr":"p"}`
	req := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	msg := append([]byte(req), maskedText(`{"op":"AUTH","token":"`+testToken+`","corr":"a"}`)...)
	msg = append(msg, maskedText(big)...)
	_, err = c.Write(msg)
	require.NoError(t, err)

	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	for _, corr := range []string{"a", "p"} {
		h := make([]byte, 2)
		_, err := io.ReadFull(br, h)
		require.NoError(t, err)
		n := int(h[1] & 0x7f)
		if n == 126 {
			l := make([]byte, 2)
			_, err = io.ReadFull(br, l)
			require.NoError(t, err)
			n = int(binary.BigEndian.Uint16(l))
		}
		body := make([]byte, n)
		_, err = io.ReadFull(br, body)
		require.NoError(t, err)
		assert.Contains(t, string(body), `"op":"OK"`, "answer to %s: %s", corr, body)
		assert.Contains(t, string(body), `"corr":"`+corr+`"`)
	}
}
