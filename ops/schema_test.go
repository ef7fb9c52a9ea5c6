package ops_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/promethean/promlib/ops"
)

// Without a registry the schema endpoints answer 501; bad parameters are
// named before that.
func TestSchemasWithoutRegistry(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ops.Config{Bus: newBus(t)})
	rec := do(t, h, http.MethodGet, "/ops/schemas", "")
	assert.Equal(t, http.StatusNotImplemented, rec.Code, rec.Body.String())
	rec = do(t, h, http.MethodPost, "/ops/schemas", `{"topic":"orders","schema":"{\"type\":\"object\"}"}`)
	assert.Equal(t, http.StatusNotImplemented, rec.Code, rec.Body.String())
	rec = do(t, h, http.MethodPost, "/ops/schemas", `{"topic":"orders"}`)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "schema")
	rec = do(t, h, http.MethodPost, "/ops/schemas", `{"topic":"orders","schema":"{"}`)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "not JSON")
	rec = do(t, h, http.MethodPost, "/ops/schemas", `{"topic":"bad topic","schema":"true"}`)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "topic")
	rec = do(t, h, http.MethodDelete, "/ops/schemas", "")
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}
