package ws

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
)

// recvText reads the next message as a browser would: it must be valid
// UTF-8 (a browser closes the connection with 1006 otherwise).
func (r *raw) recvText() frame {
	r.t.Helper()
	select {
	case m := <-r.rd:
		require.NoError(r.t, m.err, "connection ended")
		require.True(r.t, utf8.Valid(m.data), "server sent invalid UTF-8: %q", m.data)
		var f frame
		require.NoError(r.t, json.Unmarshal(m.data, &f), "server sent bad JSON: %s", m.data)
		return f
	case <-time.After(5 * time.Second):
		r.t.Fatal("no frame within 5s")
		return nil
	}
}

// httpPublish posts body to /publish/topic?query and returns the status
// and the error code of the answer.
func (e *testEnv) httpPublish(topic, query, body string) (int, string, string) {
	e.t.Helper()
	return e.httpPublishAs(topic, query, "application/json", body)
}

// httpPublishAs is httpPublish with the given Content-Type.
func (e *testEnv) httpPublishAs(topic, query, contentType, body string) (int, string, string) {
	e.t.Helper()
	req, err := newRequest(e.srv.URL+"/publish/"+topic+"?"+query, testToken, body)
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var out struct {
		Error struct{ Code, Msg string }
	}
	require.NoError(e.t, decodeJSON(resp.Body, &out))
	return resp.StatusCode, out.Error.Code, out.Error.Msg
}

// Text that is not UTF-8 is refused at every edge and never stored, so a
// browser subscribed to the topic never gets a frame it would die on; the
// subscriber keeps working after the bad publishes.
func TestInvalidUTF8RefusedAtTheEdge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	browser := e.authed()
	browser.subscribe("t", "g", "s", map[string]any{"from": "earliest"})

	// HTTP: a payload, a key or a tag that is not UTF-8.
	for _, tc := range []struct{ name, query, body, field string }{
		{"payload", "", `{"v":"a` + "\xff" + `b"}`, "payload"},
		{"payload key", "", `{"` + "\xc3" + `":1}`, "payload"},
		{"key", "key=%FF", `1`, "key"},
		{"tag", "tag=ok&tag=%C3", `1`, "tags[1]"},
		{"caused_by", "caused_by=%ED%A0%80", `1`, "caused_by[0]"},
		{"sid", "sid=%FE", `1`, "sid"},
		{"id", "id=%FF", `1`, "id"},
	} {
		status, code, msg := e.httpPublish("t", tc.query, tc.body)
		assert.Equal(t, http.StatusBadRequest, status, tc.name)
		assert.Equal(t, string(wsproto.CodeBadJSON), code, tc.name)
		assert.Contains(t, msg, tc.field, tc.name)
		assert.True(t, utf8.ValidString(msg), tc.name)
	}

	// WebSocket: a binary frame may carry any bytes; one that is not UTF-8
	// is answered bad_json (without its corr, which cannot be echoed).
	attacker := e.authed()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, f := range []string{
		`{"op":"PUBLISH","topic":"t","payload":{"v":"` + "\xff" + `"},"corr":"p1"}`,
		`{"op":"PUBLISH","topic":"t","payload":1,"opts":{"key":"` + "\xc3\x28" + `"},"corr":"p2"}`,
		`{"op":"PUBLISH","topic":"t","payload":1,"opts":{"headers":{"h":"` + "\xff" + `"}},"corr":"p3"}`,
		`{"op":"PUBLISH","topic":"t","payload":1,"corr":"` + "\xff" + `"}`,
	} {
		require.NoError(t, attacker.c.Write(ctx, websocket.MessageBinary, []byte(f)))
		got := attacker.recvText()
		assert.Equal(t, "ERR", got.str("op"))
		assert.Equal(t, string(wsproto.CodeBadJSON), got.str("code"), got.str("msg"))
		assert.Empty(t, got.str("corr"))
	}

	// A text frame that is not UTF-8 breaks the WebSocket protocol: the
	// connection is closed with 1007. The websocket library sends the
	// bytes as they are (it checks no UTF-8), as a hostile client would.
	require.NoError(t, attacker.c.Write(ctx, websocket.MessageText,
		[]byte(`{"op":"PUBLISH","topic":"t","payload":"`+"\xff"+`","corr":"p4"}`)))
	ce := attacker.expectClose(5 * time.Second)
	assert.Equal(t, websocket.StatusInvalidFramePayloadData, ce.Code)

	// Nothing was stored; the browser's subscription still works and gets
	// the next good event, first.
	head, err := e.store.Head(context.Background(), "t")
	require.NoError(t, err)
	assert.Zero(t, head, "nothing may be stored")
	status, _, _ := e.httpPublish("t", "key=clé", `{"v":"café €"}`)
	require.Equal(t, http.StatusOK, status)
	ev := browser.recvText()
	require.Equal(t, "EVENT", ev.str("op"))
	assert.Equal(t, "café €", ev.obj("event").obj("payload").str("v"))
	assert.Equal(t, "clé", ev.obj("event").str("key"))
	browser.send(ack("ACK", "t", "g", ev.obj("event").str("id"), "a"))
	browser.expectOK("a")
}

// Payloads nest at most event.MaxJSONDepth levels, on every edge, so no
// client's decoder meets a frame it cannot decode; the Go client refuses
// deeper ones before sending and decodes the deepest allowed.
func TestJSONDepthLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

	r := e.authed()
	for _, n := range []int{event.MaxJSONDepth + 1, 1001, 9000, 20000} {
		r.send(`{"op":"PUBLISH","topic":"t","payload":` + nest(n) + `,"corr":"deep"}`)
		if n < 9999 {
			f := r.expectErr(wsproto.CodeBadJSON, "deep")
			assert.Contains(t, f.str("msg"), "deeper than 64")
		} else {
			// Too deep for encoding/json to decode the frame at all: the
			// corr cannot be read either.
			r.expectErr(wsproto.CodeBadJSON, "")
		}
		status, code, msg := e.httpPublish("t", "", nest(n))
		assert.Equal(t, http.StatusBadRequest, status)
		assert.Equal(t, string(wsproto.CodeBadJSON), code)
		assert.Contains(t, msg, "deeper than 64")
	}
	head, err := e.store.Head(context.Background(), "t")
	require.NoError(t, err)
	assert.Zero(t, head, "nothing may be stored")

	c := e.client(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.Publish(ctx, "t", []byte(nest(event.MaxJSONDepth+1)))
	assert.ErrorIs(t, err, wsclient.ErrInvalid)
	assert.ErrorIs(t, err, event.ErrBadJSON)

	got := make(chan []byte, 1)
	_, err = c.Subscribe(ctx, "t", "g", func(_ context.Context, m *wsclient.Message) error {
		got <- append([]byte(nil), m.Payload...)
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	_, err = c.Publish(ctx, "t", []byte(nest(event.MaxJSONDepth)))
	require.NoError(t, err)
	select {
	case p := <-got:
		assert.Equal(t, nest(event.MaxJSONDepth), string(p))
	case <-ctx.Done():
		t.Fatal("the Go client did not deliver the deepest allowed payload")
	}
}

// When its Bus closes, whatever the shutdown order, the gateway closes
// every connection with 1001, so that no subscriber waits in silence; the
// Go client reports the close, and publishing fails with a clear error.
func TestBusCloseClosesConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	r.subscribe("t", "g", "s", nil)
	c := e.client(&wsclient.Options{Token: testToken, DisableReconnect: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx, "t", "g2", func(context.Context, *wsclient.Message) error { return nil })
	require.NoError(t, err)

	require.NoError(t, e.bus.Close(ctx)) // the bus first, the gateway still up

	ce := r.expectClose(5 * time.Second)
	assert.Equal(t, websocket.StatusGoingAway, ce.Code)
	assert.Equal(t, "bus closed", ce.Reason)

	// The Go client's subscription ends, saying why; later calls fail
	// with the same reason.
	var cerr *wsclient.CloseError
	select {
	case <-sub.Done():
		require.ErrorAs(t, sub.Err(), &cerr, "the subscription says why it ended")
		assert.Equal(t, wsproto.CloseGoingAway, cerr.Code)
		assert.Equal(t, "bus closed", cerr.Reason)
	case <-ctx.Done():
		t.Fatal("the subscription did not end with its connection")
	}
	_, err = c.Publish(ctx, "t", []byte(`1`))
	require.ErrorIs(t, err, wsclient.ErrDisconnected)
	cerr = nil
	require.ErrorAs(t, err, &cerr)
	assert.Equal(t, wsproto.CloseGoingAway, cerr.Code)

	status, code, msg := e.httpPublish("t", "", `1`)
	assert.Equal(t, http.StatusInternalServerError, status)
	assert.Equal(t, string(wsproto.CodePublishFailed), code)
	assert.Contains(t, msg, "the bus is closed")

	_, resp, err := websocket.Dial(ctx, e.url, nil)
	require.Error(t, err, "no new connection over a closed bus")
	if resp != nil {
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	}
}
