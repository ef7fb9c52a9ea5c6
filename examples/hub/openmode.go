package main

import (
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/promethean/promlib/internal/httpx"
)

// simpleContentTypes are the content types a page of any site may POST
// cross-site without a CORS preflight ("simple requests").
var simpleContentTypes = []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"}

// guardOpenMode protects a hub that runs without authentication from the
// browsers of its own users: a page of another site may send simple
// requests to a loopback address, and with DNS rebinding it may even read
// the answers. So, in open mode,
//
//   - a POST with a CORS-simple content type is refused (415): every POST
//     endpoint of the hub takes JSON, which a cross-site page cannot send
//     without a preflight, which the hub never grants;
//   - a request whose Host is a name other than localhost or one of
//     allowedHosts is refused (421): a rebound name points at the hub's
//     address but keeps its own name in Host. IP literals are allowed, as
//     rebinding needs a name.
func guardOpenMode(next http.Handler, allowedHosts []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, allowedHosts) {
			httpx.WriteError(w, http.StatusMisdirectedRequest, "bad_host",
				"the hub runs without authentication and does not serve the host "+strconv.Quote(r.Host)+
					"; use its address, localhost, or a name given with -allowed-hosts")
			return
		}
		if r.Method == http.MethodPost {
			mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if slices.Contains(simpleContentTypes, strings.ToLower(mt)) {
				httpx.WriteError(w, http.StatusUnsupportedMediaType, "bad_content_type", contentTypeRefused(mt))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// contentTypeRefused is the message of the 415: which types the hub takes,
// and how to send one (curl -d sends a form's type unless told otherwise).
func contentTypeRefused(mt string) string {
	return "Content-Type " + strconv.Quote(mt) + " is refused without authentication, since a page of another site may send it; " +
		"send JSON as application/json (with curl: -H 'Content-Type: application/json'), " +
		"a batch as application/x-ndjson, or bytes as application/octet-stream or another type that is not a form's or text/plain"
}

func hostAllowed(hostport string, allowed []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || host == "localhost" {
		return true
	}
	return slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, host) })
}
