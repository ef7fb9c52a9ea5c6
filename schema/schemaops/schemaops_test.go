package schemaops_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/schema"
	"github.com/promethean/promlib/schema/schemaops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpsRegistersAndLists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, err := schema.NewRegistry(ctx, schema.Config{Store: schema.NewMemoryStore()})
	require.NoError(t, err)
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{PublishInterceptors: []event.PublishInterceptor{reg.Interceptor()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bus.Close(context.Background()) })
	// "admin" may do anything; "viewer" may only inspect orders.*.
	verifier := auth.VerifierFunc(func(_ context.Context, tok string) (*auth.Principal, error) {
		switch tok {
		case "admin":
			return &auth.Principal{Subject: tok, Policy: acl.AllowEverything()}, nil
		case "viewer":
			r, err := acl.ParseScope("inspect:orders.*")
			if err != nil {
				return nil, err
			}
			p, err := acl.NewPolicy(r)
			return &auth.Principal{Subject: tok, Policy: p}, err
		}
		return nil, &auth.TokenError{Reason: auth.ErrUnknownToken, Detail: "unknown token"}
	})
	h, err := ops.NewHandler(ops.Config{Bus: bus, Verifier: verifier, Schemas: schemaops.New(reg)})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	do := func(method, tok, path string, body any) (int, string) {
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			require.NoError(t, err)
			rd = strings.NewReader(string(b))
		}
		req, err := http.NewRequest(method, srv.URL+path, rd)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	v1 := `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
	code, body := do(http.MethodPost, "viewer", "/ops/schemas", map[string]string{"topic": "orders.eu", "schema": v1})
	assert.Equal(t, http.StatusForbidden, code, body)
	code, body = do(http.MethodPost, "admin", "/ops/schemas", map[string]string{"topic": "orders.eu", "schema": v1, "rule": "backward"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"version":1`)
	code, body = do(http.MethodPost, "admin", "/ops/schemas", map[string]string{"topic": "orders.eu", "schema": `{"type":"object","required":["id","x"]}`})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "required")
	code, body = do(http.MethodPost, "admin", "/ops/schemas", map[string]string{"topic": "orders.eu", "schema": `{"type":"object","oneOf":[true]}`})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "oneOf")
	code, body = do(http.MethodPost, "admin", "/ops/schemas", map[string]string{"topic": "orders.eu", "schema": `{`})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "schema")
	code, body = do(http.MethodPost, "admin", "/ops/schemas", map[string]string{"topic": "secret.t", "schema": `true`})
	require.Equal(t, http.StatusOK, code, body)

	// The viewer sees orders.eu only; the admin sees both.
	code, body = do(http.MethodGet, "viewer", "/ops/schemas", nil)
	require.Equal(t, http.StatusOK, code, body)
	var list struct {
		Schemas []struct {
			Topic    string
			Current  int
			Rule     string
			Versions []ops.SchemaVersion
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Schemas, 1)
	assert.Equal(t, "orders.eu", list.Schemas[0].Topic)
	assert.Equal(t, "backward", list.Schemas[0].Rule)
	assert.JSONEq(t, v1, string(list.Schemas[0].Versions[0].Schema))
	code, body = do(http.MethodGet, "admin", "/ops/schemas", nil)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "secret.t")
	code, _ = do(http.MethodGet, "viewer", "/ops/schemas?topic="+url.QueryEscape("secret.t"), nil)
	assert.Equal(t, http.StatusForbidden, code)

	// Registered through ops, enforced on publish.
	_, err = bus.Publish(ctx, "orders.eu", []byte(`{"no":"id"}`))
	assert.ErrorIs(t, err, schema.ErrPayloadInvalid)
}
