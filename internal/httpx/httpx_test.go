package httpx_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/internal/httpx"
)

func TestWriteError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status    int
		code      string
		challenge string
	}{
		{http.StatusUnauthorized, httpx.CodeUnauthorized, "Bearer"},
		{http.StatusUnauthorized, "auth_failed", `Bearer error="invalid_token"`},
		{http.StatusBadRequest, "bad_request", ""},
	} {
		w := httptest.NewRecorder()
		httpx.WriteError(w, tt.status, tt.code, "why")
		assert.Equal(t, tt.status, w.Code)
		assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
		assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
		assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
		assert.Equal(t, tt.challenge, w.Header().Get("WWW-Authenticate"))
		assert.JSONEq(t, `{"error":{"code":"`+tt.code+`","msg":"why"}}`, w.Body.String())
	}
}

func TestWriteJSONUnencodable(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"f": func() {}})
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	var b httpx.ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b))
	assert.Equal(t, "internal", b.Error.Code)
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	req := func(body, ct string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		return r
	}
	tests := []struct {
		name, body, ct string
		wantErr        error
	}{
		{name: "object", body: `{"a":1}`, ct: "application/json; charset=utf-8"},
		{name: "no content type", body: `{"a":1}`},
		{name: "empty", body: "  \n", wantErr: httpx.ErrEmpty},
		{name: "too large", body: `{"a":"` + strings.Repeat("x", 64) + `"}`, wantErr: httpx.ErrTooLarge},
		{name: "form", body: `a=1`, ct: "application/x-www-form-urlencoded", wantErr: httpx.ErrContentType},
		{name: "not an object", body: `[1]`, wantErr: httpx.ErrBadBody},
		{name: "not JSON", body: `{"a":`, wantErr: httpx.ErrBadBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v map[string]any
			err := httpx.DecodeJSON(httptest.NewRecorder(), req(tt.body, tt.ct), 32, &v)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, float64(1), v["a"])
				return
			}
			assert.True(t, errors.Is(err, tt.wantErr), "%v", err)
		})
	}
}
