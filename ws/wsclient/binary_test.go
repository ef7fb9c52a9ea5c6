package wsclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/ws/internal/wsframe"
)

// A server that sends binary EVENTs with bad base64 or a mismatched
// marker: the client drops them (they are redelivered after their
// lease) and delivers the good one that follows, decoded.
func TestHostileBinaryEvents(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			_, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			f, err := wsframe.Decode(data)
			if err != nil {
				return
			}
			if f.Op == wsproto.OpAck {
				continue
			}
			_ = c.Write(r.Context(), websocket.MessageText, wsframe.AppendOK(nil, f.Corr, "", 0))
			if f.Op != wsproto.OpSubscribe {
				continue
			}
			for _, ev := range []string{
				`{"id":"bad-b64","seq":1,"ts":1,"topic":"t","partition":0,"payload":"AP8","payload_encoding":"base64","content_type":"image/png"}`,
				`{"id":"no-marker","seq":2,"ts":1,"topic":"t","partition":0,"payload":"AP8=","content_type":"image/png"}`,
				`{"id":"json-marked","seq":3,"ts":1,"topic":"t","partition":0,"payload":"e30=","payload_encoding":"base64","content_type":"application/json"}`,
				`{"id":"hex","seq":4,"ts":1,"topic":"t","partition":0,"payload":"00","payload_encoding":"hex"}`,
				`{"id":"good","seq":5,"ts":1,"topic":"t","partition":0,"payload":"AP8=","payload_encoding":"base64","content_type":"image/png"}`,
			} {
				frame := `{"op":"EVENT","topic":"t","group":"g","event":` + ev + `,"ctx":{"attempt":1,"ack_deadline_ms":30000}}`
				_ = c.Write(r.Context(), websocket.MessageText, []byte(frame))
			}
		}
	}))
	defer srv.Close()
	c, err := Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), &Options{Token: "x", DisableReconnect: true})
	require.NoError(t, err)
	defer c.Close()
	got := make(chan *Message, 8)
	_, err = c.Subscribe(context.Background(), "t", "g", func(ctx context.Context, m *Message) error {
		got <- m
		return nil
	})
	require.NoError(t, err)
	m := <-got
	assert.Equal(t, "good", m.ID, "the bad events before it were dropped")
	assert.Equal(t, []byte{0, 0xff}, []byte(m.Payload))
	assert.Equal(t, "image/png", m.ContentType)
}
