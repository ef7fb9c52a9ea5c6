package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHubFailedAuthFlags: the hub's flags set the limits of refused AUTH
// and the trusted proxies; bad values are refused naming the flag.
func TestHubFailedAuthFlags(t *testing.T) {
	none := func(string) string { return "" }
	s, err := parseFlags(nil, none, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3, s.maxFailedAuth)
	assert.Equal(t, 10.0, s.failedAuthRate)
	assert.Equal(t, 20, s.failedAuthBurst)
	assert.Empty(t, s.trustedProxies, "no proxy is trusted by default")

	s, err = parseFlags([]string{"-trusted-proxies", "10.0.0.0/8, 192.0.2.7,fd00::/8"}, none, io.Discard)
	require.NoError(t, err)
	require.Len(t, s.trustedProxies, 3)
	assert.Equal(t, "192.0.2.7/32", s.trustedProxies[1].String())

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"-trusted-proxies", "10.0.0.0/33,proxy.internal"}, []string{"-trusted-proxies", `"10.0.0.0/33"`, `"proxy.internal"`, "CIDR"}},
		{[]string{"-max-failed-auth", "0"}, []string{"-max-failed-auth"}},
		{[]string{"-failed-auth-rate", "0"}, []string{"-failed-auth-rate"}},
		{[]string{"-failed-auth-rate", "NaN"}, []string{"-failed-auth-rate"}},
		{[]string{"-failed-auth-burst", "0"}, []string{"-failed-auth-burst"}},
	} {
		_, err := parseFlags(tt.args, none, io.Discard)
		for _, w := range tt.want {
			assert.ErrorContains(t, err, w, "%v", tt.args)
		}
	}
}

// TestHubFailedAuth: over the hub, 3 wrong tokens close a connection with
// 4403, and an address that spent its burst gets rate_limited while
// another is unaffected; with -trusted-proxies naming loopback, the
// address is X-Forwarded-For's.
func TestHubFailedAuth(t *testing.T) {
	addr, _, stop := runHub(t, map[string]string{"WS_TOKEN": "tok"}, "-failed-auth-burst", "4", "-failed-auth-rate", "0.001", "-trusted-proxies", "127.0.0.0/8")
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(xff string) *websocket.Conn {
		t.Helper()
		c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"X-Forwarded-For": {xff}}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.CloseNow() })
		return c
	}
	authAs := func(c *websocket.Conn, token string) (string, error) {
		t.Helper()
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"op":"AUTH","token":"`+token+`"}`)))
		_, data, err := c.Read(ctx)
		if err != nil {
			return "", err
		}
		var f struct{ Op, Code string }
		require.NoError(t, json.Unmarshal(data, &f))
		if f.Op == "OK" {
			return "OK", nil
		}
		return f.Code, nil
	}

	c := dial("198.51.100.1")
	for range 2 {
		code, err := authAs(c, "wrong")
		require.NoError(t, err)
		assert.Equal(t, "auth_failed", code)
	}
	_, err := authAs(c, "wrong")
	assert.Equal(t, 4403, int(websocket.CloseStatus(err)), "%v", err)

	c = dial("198.51.100.1")
	code, err := authAs(c, "wrong")
	require.NoError(t, err)
	assert.Equal(t, "auth_failed", code, "the 4th refusal of the burst of 4")
	code, err = authAs(c, "tok")
	require.NoError(t, err)
	assert.Equal(t, "rate_limited", code, "the burst is spent: even a good token is not checked")

	c = dial("198.51.100.2")
	code, err = authAs(c, "tok")
	require.NoError(t, err)
	assert.Equal(t, "OK", code, "another address is unaffected")
}
