package ws

import (
	"context"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
)

// httpPublishTyped posts body with the given Content-Type and returns the
// status and error code.
func (e *testEnv) httpPublishTyped(topic, ct, body string) (int, string) {
	e.t.Helper()
	status, code, _ := e.httpPublishAs(topic, "", ct, body)
	return status, code
}

// Binary payloads published over HTTP, the raw protocol and the Go client
// reach a client that ignores the marker as a valid frame with a base64
// string, and the Go client as the bytes, with their content type.
func TestBinaryPayloadsOverTheWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	browser := e.authed()
	browser.subscribe("bin", "g", "s", map[string]any{"from": "earliest", "maxInFlight": 1})
	c := e.client(nil)
	got := make(chan *wsclient.Message, 8)
	_, err := c.Subscribe(context.Background(), "bin", "go", func(ctx context.Context, m *wsclient.Message) error {
		got <- m
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)

	blob := "\x00\xff\xfe not UTF-8 \x80"
	status, code := e.httpPublishTyped("bin", "application/octet-stream", blob)
	require.Equal(t, http.StatusOK, status, code)
	pub := e.authed()
	pub.send(map[string]any{"op": "PUBLISH", "topic": "bin", "corr": "p", "payload": base64.StdEncoding.EncodeToString([]byte{1, 2, 3}),
		"payload_encoding": "base64", "opts": map[string]any{"content_type": "image/png"}})
	pub.expectOK("p")
	_, err = c.Publish(context.Background(), "bin", []byte{0xca, 0xfe}, event.WithContentType("application/x-thing"))
	require.NoError(t, err)
	status, code = e.httpPublishTyped("bin", "application/json", `{"still":"json"}`)
	require.Equal(t, http.StatusOK, status, code)

	want := []struct{ payload, ct string }{
		{blob, "application/octet-stream"}, {"\x01\x02\x03", "image/png"}, {"\xca\xfe", "application/x-thing"}, {`{"still":"json"}`, ""},
	}
	for i, w := range want {
		f := browser.recvText().obj("event")
		if w.ct == "" {
			assert.Equal(t, map[string]any{"still": "json"}, f["payload"])
			assert.NotContains(t, f, "payload_encoding")
			assert.NotContains(t, f, "content_type")
		} else {
			assert.Equal(t, base64.StdEncoding.EncodeToString([]byte(w.payload)), f.str("payload"), "event %d", i)
			assert.Equal(t, "base64", f.str("payload_encoding"))
			assert.Equal(t, w.ct, f.str("content_type"))
		}
		browser.send(ack("ACK", "bin", "g", f.str("id"), ""))
		browser.expectOK("")

		m := <-got
		assert.Equal(t, w.payload, string(m.Payload), "event %d", i)
		assert.Equal(t, w.ct, m.ContentType)
	}
}

// Hostile binary publishes are refused with an error that names the
// problem, and nothing is stored.
func TestBinaryPayloadsHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	for _, tc := range []struct {
		name, frame, code, msg string
	}{
		{"bad base64", `{"op":"PUBLISH","topic":"h","corr":"c","payload":"AP8","payload_encoding":"base64"}`, "bad_frame", "base64"},
		{"marker on an object", `{"op":"PUBLISH","topic":"h","corr":"c","payload":{"a":1},"payload_encoding":"base64"}`, "bad_frame", "payload"},
		{"unknown encoding", `{"op":"PUBLISH","topic":"h","corr":"c","payload":"00","payload_encoding":"hex"}`, "bad_frame", "payload_encoding"},
		{"marker with a JSON type", `{"op":"PUBLISH","topic":"h","corr":"c","payload":"e30=","payload_encoding":"base64","opts":{"content_type":"application/json"}}`, "bad_frame", "payload_encoding"},
		{"binary type without marker", `{"op":"PUBLISH","topic":"h","corr":"c","payload":"AP8=","opts":{"content_type":"image/png"}}`, "bad_frame", "payload_encoding"},
		{"text type not UTF-8", `{"op":"PUBLISH","topic":"h","corr":"c","payload":"/w==","payload_encoding":"base64","opts":{"content_type":"text/plain"}}`, "bad_json", "UTF-8"},
		{"not a media type", `{"op":"PUBLISH","topic":"h","corr":"c","payload":"/w==","payload_encoding":"base64","opts":{"content_type":"nonsense"}}`, "bad_frame", "content_type"},
	} {
		r.send(tc.frame)
		f := r.expectErr(wsproto.Code(tc.code), "c")
		assert.Contains(t, f.str("msg"), tc.msg, tc.name)
	}
	for _, tc := range []struct {
		ct, body, code string
	}{
		{"text/csv", "a,\xff", "bad_json"},
		{"application/octet-stream; x", "x", "bad_frame"},
		{"text/plain", "not json", "bad_json"}, // a form type stays JSON, as before
	} {
		status, code := e.httpPublishTyped("h", tc.ct, tc.body)
		assert.Equal(t, http.StatusBadRequest, status, tc.ct)
		assert.Equal(t, tc.code, code, tc.ct)
	}
	head, err := e.bus.Store().Head(context.Background(), "h")
	require.NoError(t, err)
	assert.Zero(t, head, "nothing was stored")
	// The connection still works.
	r.send(`{"op":"PUBLISH","topic":"h","corr":"ok","payload":"AP8=","payload_encoding":"base64"}`)
	r.expectOK("ok")
	rec, err := e.bus.Store().Read(context.Background(), "h", 0, 1)
	require.NoError(t, err)
	require.Len(t, rec, 1)
	assert.Equal(t, []byte{0, 0xff}, []byte(rec[0].Payload))
	assert.Equal(t, event.ContentTypeBinary, rec[0].ContentType)
}
