package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Against a hub that wants a token: none or a wrong one is the hub's
// error on one line, over HTTP and over the WebSocket API; -token or
// PROMLIB_TOKEN is sent as a bearer token.
func TestAuth(t *testing.T) {
	t.Parallel()
	const topic = "t.auth"
	url := hubs.secured.url
	promctlAt(t, url, "", "topics").fails(t, 1, "topics: unauthorized:", "(HTTP 401)")
	promctlAt(t, url, "", "topics", "-token", "wrong").fails(t, 1, "topics: auth_failed:", "(HTTP 401)")
	promctlAt(t, url, "", "publish", topic, "1", "-token", "wrong").fails(t, 1, "publish: auth_failed:")
	promctlAt(t, url, "", "tail", topic, "-token", "wrong").fails(t, 1, "tail: auth_failed:")
	promctlAt(t, url, "1\n", "import", topic, "-token", "wrong").fails(t, 1, "import: auth_failed:")

	promctlAt(t, url, "", "-token", testToken, "publish", topic, `{"n":1}`).ok(t)
	r := promctlAt(t, url, "", "tail", topic, "-from", "earliest", "-n", "1", "-token", testToken).ok(t)
	assert.Contains(t, r.stdout, `{"n":1}`)
	r = promctlAt(t, url, "", "topics", topic, "-token", testToken).ok(t)
	assert.Regexp(t, `(?m)^t\.auth +8 +1 `, r.stdout)
}

// PROMLIB_URL and PROMLIB_TOKEN stand for -url and -token; the flags win.
// The token is never printed, not even as a flag's default.
func TestEnvironment(t *testing.T) {
	t.Setenv(envURL, hubs.secured.url)
	t.Setenv(envToken, testToken)
	var o, e bytes.Buffer
	code := run(t.Context(), []string{"topics"}, strings.NewReader(""), &o, &e)
	assert.Equal(t, 0, code, e.String())
	assert.Contains(t, o.String(), "TOPIC")

	o, e = bytes.Buffer{}, bytes.Buffer{}
	code = run(t.Context(), []string{"topics", "-token", "wrong"}, strings.NewReader(""), &o, &e)
	assert.Equal(t, 1, code)
	assert.Contains(t, e.String(), "auth_failed")

	o, e = bytes.Buffer{}, bytes.Buffer{}
	code = run(t.Context(), []string{"tail", "-h"}, strings.NewReader(""), &o, &e)
	assert.Equal(t, 0, code)
	assert.Contains(t, o.String(), hubs.secured.url, "-url's default is PROMLIB_URL")
	assert.NotContains(t, o.String(), testToken)
}
