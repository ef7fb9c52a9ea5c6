package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// post sends body to the hub's publish endpoint with the given Host and
// Content-Type and returns the status and the error code, if any.
func postAs(t *testing.T, addr, host, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish/t", strings.NewReader(body))
	require.NoError(t, err)
	req.Host = host
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Code
}

// Without authentication the hub refuses what a page of another site can
// send it: CORS-simple POSTs (no preflight) and requests under a rebound
// host name.
func TestHubOpenModeRefusesCrossSiteRequests(t *testing.T) {
	t.Parallel()
	addr, _, stop := runHub(t, nil, "-allowed-hosts", "hub.internal")
	t.Cleanup(stop)
	_, port, _ := strings.Cut(addr, ":")

	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		status, code := postAs(t, addr, addr, ct, `{"a":1}`)
		assert.Equal(t, http.StatusUnsupportedMediaType, status, ct)
		assert.Equal(t, "bad_content_type", code, ct)
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port} {
		status, code := postAs(t, addr, host, "application/json", `{"a":1}`)
		assert.Equal(t, http.StatusMisdirectedRequest, status, host)
		assert.Equal(t, "bad_host", code, host)
	}
	for _, host := range []string{addr, "localhost:" + port, "[::1]:" + port, "hub.internal:" + port, "HUB.internal"} {
		status, _ := postAs(t, addr, host, "application/json", `{"a":1}`)
		assert.Equal(t, http.StatusOK, status, host)
	}
}

// With authentication a token is needed anyway, so the hub serves any host
// (it may sit behind a proxy that keeps the public name).
func TestHubWithTokenServesAnyHost(t *testing.T) {
	t.Parallel()
	addr, _ := startHub(t, map[string]string{"WS_TOKEN": "tok"})
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish/t", strings.NewReader(`1`))
	require.NoError(t, err)
	req.Host = "public.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// wsRaw dials the hub's gateway and returns a function that sends a frame
// and one that reads the next frame, both bounded in time.
func wsRaw(t *testing.T, addr string) (send func(string), recv func() map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseNow() })
	send = func(frame string) {
		t.Helper()
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(frame)))
	}
	recv = func() map[string]any {
		t.Helper()
		_, data, err := c.Read(ctx)
		require.NoError(t, err)
		var f map[string]any
		require.NoError(t, json.Unmarshal(data, &f), "%s", data)
		return f
	}
	return send, recv
}

// The open hub (no WS_TOKEN, no JWT_*) takes SUBSCRIBE and PUBLISH as a
// connection's first frames, as the README says, over the real wire; an
// AUTH frame is still answered OK there. With a token the hub wants AUTH
// first.
func TestHubOpenModeNeedsNoAuth(t *testing.T) {
	t.Parallel()
	t.Run("open", func(t *testing.T) {
		t.Parallel()
		addr, _ := startHub(t, nil)
		send, recv := wsRaw(t, addr)
		send(`{"op":"SUBSCRIBE","topic":"orders","group":"billing","corr":"s1"}`)
		assert.Equal(t, map[string]any{"op": "OK", "corr": "s1"}, recv())
		send(`{"op":"PUBLISH","topic":"orders","payload":{"n":2},"corr":"p1"}`)
		var ev, ok map[string]any
		for ev == nil || ok == nil { // the OK and the EVENT, in either order
			f := recv()
			switch f["op"] {
			case "OK":
				ok = f
			case "EVENT":
				ev = f
			default:
				t.Fatalf("unexpected frame %v", f)
			}
		}
		assert.Equal(t, "p1", ok["corr"])
		assert.Equal(t, "billing", ev["group"])
		assert.Equal(t, map[string]any{"n": float64(2)}, ev["event"].(map[string]any)["payload"])

		send2, recv2 := wsRaw(t, addr)
		send2(`{"op":"AUTH","token":"anything","corr":"a"}`)
		assert.Equal(t, map[string]any{"op": "OK", "corr": "a"}, recv2())
		send2(`{"op":"SUBSCRIBE","topic":"orders","corr":"live"}`)
		assert.Equal(t, "OK", recv2()["op"])
	})
	t.Run("token", func(t *testing.T) {
		t.Parallel()
		addr, _ := startHub(t, map[string]string{"WS_TOKEN": "tok"})
		send, recv := wsRaw(t, addr)
		send(`{"op":"SUBSCRIBE","topic":"orders","group":"billing","corr":"s1"}`)
		f := recv()
		assert.Equal(t, "ERR", f["op"])
		assert.Equal(t, "unauthorized", f["code"])
		assert.Contains(t, f["msg"], "send AUTH first")
		send(`{"op":"AUTH","token":"tok","corr":"a"}`)
		assert.Equal(t, map[string]any{"op": "OK", "corr": "a"}, recv())
		send(`{"op":"SUBSCRIBE","topic":"orders","group":"billing","corr":"s2"}`)
		assert.Equal(t, map[string]any{"op": "OK", "corr": "s2"}, recv())
	})
}

// What README's curl example sends, and what a plain curl -d sends: the
// 415 says which types the hub takes and how to send JSON with curl.
func TestHubOpenModeCurlPublish(t *testing.T) {
	t.Parallel()
	addr, _ := startHub(t, nil)
	post := func(contentType string) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish/orders", strings.NewReader(`{"n":1}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		return resp.StatusCode, body
	}
	status, body := post("application/x-www-form-urlencoded") // curl -d
	require.Equal(t, http.StatusUnsupportedMediaType, status)
	msg := body["error"].(map[string]any)["msg"].(string)
	assert.Contains(t, msg, `"application/x-www-form-urlencoded"`)
	assert.Contains(t, msg, "-H 'Content-Type: application/json'")
	assert.Contains(t, msg, "application/x-ndjson")

	status, body = post("application/json") // curl -H 'Content-Type: application/json' -d
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.NotEmpty(t, body["id"])
	assert.Equal(t, float64(1), body["seq"])
}
