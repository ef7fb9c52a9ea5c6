package livedash_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/examples/livedash"
)

// get fetches p from the handler mounted at /live/, as the hub mounts it.
func get(t *testing.T, p string) (*http.Response, string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /live/", http.StripPrefix("/live", livedash.Handler()))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(body)
}

// The page, its script and style are served with a policy that allows
// only them and connections to the hub's own origin.
func TestPage(t *testing.T) {
	t.Parallel()
	res, body := get(t, "/live/")
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, res.Header.Get("Content-Type"), "text/html")
	csp := res.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "script-src 'self'")
	assert.Contains(t, csp, "connect-src 'self'")
	assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	for _, id := range []string{livedash.ProcessesID, livedash.StatusID} {
		assert.Contains(t, body, `id="`+id+`"`)
	}
	assert.Contains(t, body, `<script type="module" src="app.js">`)

	for p, ctype := range map[string]string{
		"/live/app.js":            "javascript",
		"/live/style.css":         "text/css",
		"/live/promlib/index.js":  "javascript",
		"/live/promlib/client.js": "javascript",
	} {
		res, _ := get(t, p)
		assert.Equal(t, http.StatusOK, res.StatusCode, p)
		assert.Contains(t, res.Header.Get("Content-Type"), ctype, p)
	}
	for _, p := range []string{"/live/promlib/", "/live/nope.js"} {
		res, _ := get(t, p)
		assert.Equal(t, http.StatusNotFound, res.StatusCode, "%s: no listing, nothing else", p)
	}
}

// Every module the page loads is there: the relative imports of app.js
// and of the client's modules resolve to served files.
func TestModulesResolve(t *testing.T) {
	t.Parallel()
	importRE := regexp.MustCompile(`(?m)(?:^|\s)(?:import|export)\b[^"']*?from\s*["'](\.[^"']+)["']`)
	files := []string{"/app.js"}
	seen := map[string]bool{}
	for len(files) > 0 {
		f := files[0]
		files = files[1:]
		if seen[f] {
			continue
		}
		seen[f] = true
		res, body := get(t, "/live"+f)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s is imported but not served", f)
		for _, m := range importRE.FindAllStringSubmatch(body, -1) {
			files = append(files, path.Join(path.Dir(f), m[1]))
		}
	}
	assert.True(t, seen["/promlib/index.js"], "app.js imports the client")
	assert.True(t, seen["/promlib/live.js"], "the client has live subscriptions")
	// Every module of the client is reached (frames.js holds only types:
	// nothing imports it at run time).
	for _, f := range []string{"client", "connection", "errors", "ids", "index", "live", "subscription", "token"} {
		assert.True(t, seen["/promlib/"+f+".js"], "/promlib/%s.js not reached", f)
	}
}
