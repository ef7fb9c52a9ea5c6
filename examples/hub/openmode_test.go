package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

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
