package schema_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/schema"
	"github.com/promethean/promlib/ws"
	"github.com/promethean/promlib/ws/wsclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Over the real wire: the gateway answers a payload that breaks the
// topic's schema ERR schema_invalid with the pointer and the reason, and
// HTTP publish answers 422; a good payload is stored with its version.
func TestGatewayAnswersSchemaInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, bus, st := newBus(t)
	_, err := reg.Register(ctx, "orders", json.RawMessage(orderV1), schema.RuleBackward)
	require.NoError(t, err)
	gw, err := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("s3cret")})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ws", gw)
	mux.Handle("POST /publish/{topic}", gw.PublishHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = gw.Shutdown(context.Background()) })

	c, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &wsclient.Options{Token: "s3cret"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	_, err = c.Publish(ctx, "orders", []byte(`{"id":"a","qty":"two"}`))
	require.ErrorIs(t, err, wsproto.ErrSchemaInvalid)
	assert.Contains(t, err.Error(), `at "/qty"`)
	assert.Contains(t, err.Error(), "integer")
	res, err := c.Publish(ctx, "orders", []byte(`{"id":"a","qty":2}`))
	require.NoError(t, err)
	rec, err := st.FindByID(ctx, "orders", res.ID)
	require.NoError(t, err)
	assert.Equal(t, "1", rec.Headers[schema.DefaultHeader])

	post := func(body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/publish/orders", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := post(`{"qty":1}`)
	assert.Equal(t, http.StatusUnprocessableEntity, code)
	var eb struct {
		Error struct{ Code, Msg string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &eb), body)
	assert.Equal(t, "schema_invalid", eb.Error.Code)
	assert.Contains(t, eb.Error.Msg, "id")
	code, body = post(`{"id":"h"}`)
	assert.Equal(t, http.StatusOK, code, body)
	head, err := st.Head(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), head, "only the two good payloads were stored")
}
