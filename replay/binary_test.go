package replay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/replay"
)

// Replay and export keep binary payloads: a base64 string marked with
// payload_encoding, and the content type, which event.Record decodes back
// to the bytes.
func TestBinaryPayloadsReplayAndExport(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	ctx := context.Background()
	blob := []byte{0x00, 0xff, 0x80, '"'}
	_, err := bus.Publish(ctx, "t", blob, event.WithContentType("application/octet-stream"))
	require.NoError(t, err)
	_, err = bus.Publish(ctx, "t", []byte(`{"a":1}`))
	require.NoError(t, err)
	h := newHandler(t, store, replay.Config{})

	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	decode(t, get(t, h, "/replay?topic=t&from=earliest"), &page)
	require.Len(t, page.Events, 2)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(page.Events[0], &raw))
	assert.Equal(t, "AP+AIg==", raw["payload"])
	assert.Equal(t, "base64", raw["payload_encoding"])
	assert.Equal(t, "application/octet-stream", raw["content_type"])
	var back event.Record
	require.NoError(t, json.Unmarshal(page.Events[0], &back))
	assert.Equal(t, blob, []byte(back.Payload))
	var plain map[string]any
	require.NoError(t, json.Unmarshal(page.Events[1], &plain))
	assert.Equal(t, map[string]any{"a": float64(1)}, plain["payload"])
	assert.NotContains(t, plain, "payload_encoding")

	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL + "/export?topic=t&format=" + replay.FormatNDJSON)
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	var recs []event.Record
	for sc.Scan() {
		var r event.Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		recs = append(recs, r)
	}
	require.Len(t, recs, 2)
	assert.Equal(t, blob, []byte(recs[0].Payload))
	assert.Equal(t, "application/octet-stream", recs[0].ContentType)
	assert.JSONEq(t, `{"a":1}`, string(recs[1].Payload))
}

// Export writes each record as encoding/json writes event.Record: also a
// payload stored with white space or HTML characters, and text to escape.
func TestExportMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	ctx := context.Background()
	for _, p := range []string{`{"a": [1, 2],
 "b":"<&>"}`, `"\u2028 ` + "\u2029" + `"`, `1`} {
		_, err := bus.Publish(ctx, "t", []byte(p), event.WithHeaders(map[string]string{"h": "a b <c>"}), event.WithKey("k&"))
		require.NoError(t, err)
	}
	_, err := bus.Publish(ctx, "t", []byte{'<', ' ', 0xe2}, event.WithContentType("image/png"))
	require.NoError(t, err)
	recs, err := store.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	var want []byte
	for _, r := range recs {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		want = append(append(want, b...), '\n')
	}
	srv := httptest.NewServer(newHandler(t, store, replay.Config{}))
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL + "/export?topic=t&format=" + replay.FormatNDJSON)
	require.NoError(t, err)
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}
