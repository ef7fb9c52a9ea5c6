package clientaddr

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKey(t *testing.T) {
	t.Parallel()
	trusted, err := ParsePrefixes([]string{"10.0.0.0/8", " 192.0.2.7", "fd00::/8"})
	require.NoError(t, err)
	none, proxied := New(nil), New(trusted)
	tests := []struct {
		name, remote string
		headers      map[string][]string
		r            *Resolver
		want         string
	}{
		{"peer", "203.0.113.5:4000", nil, none, "203.0.113.5"},
		{"headers ignored without trusted proxies", "203.0.113.5:4000",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1"}, "Forwarded": {"for=1.1.1.1"}}, none, "203.0.113.5"},
		{"headers ignored from an untrusted peer", "203.0.113.5:4000",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1"}}, proxied, "203.0.113.5"},
		{"X-Forwarded-For from a trusted proxy", "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.9"}}, proxied, "198.51.100.9"},
		{"a forged hop left of the real client is ignored", "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1, 198.51.100.9"}}, proxied, "198.51.100.9"},
		{"trusted hops are skipped", "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1, 198.51.100.9", "192.0.2.7, 10.9.9.9"}}, proxied, "198.51.100.9"},
		{"every hop trusted", "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"10.0.0.1, 10.0.0.2"}}, proxied, "10.0.0.1"},
		{"an unreadable hop stops at its writer", "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.9, garbage, 10.0.0.5"}}, proxied, "10.0.0.5"},
		{"Forwarded", "10.1.2.3:4000",
			map[string][]string{"Forwarded": {`for=1.1.1.1, for="198.51.100.9:80";proto=https, for=10.0.0.2`}}, proxied, "198.51.100.9"},
		{"Forwarded IPv6", "10.1.2.3:4000",
			map[string][]string{"Forwarded": {`for="[2001:db8:1:2:3::4]:4711"`}}, proxied, "2001:db8:1:2::/64"},
		{"Forwarded unknown", "10.1.2.3:4000",
			map[string][]string{"Forwarded": {`for=unknown`}}, proxied, "10.1.2.3"},
		{"both headers agree", "10.1.2.3:4000",
			map[string][]string{"Forwarded": {`for=198.51.100.9`}, "X-Forwarded-For": {"198.51.100.9"}}, proxied, "198.51.100.9"},
		{"both headers disagree: the peer", "10.1.2.3:4000",
			map[string][]string{"Forwarded": {`for=1.1.1.1`}, "X-Forwarded-For": {"198.51.100.9"}}, proxied, "10.1.2.3"},
		{"IPv6 peer keyed by /64", "[2001:db8::1]:4000", nil, none, "2001:db8::/64"},
		{"IPv4-mapped peer", "[::ffff:10.1.2.3]:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.9"}}, proxied, "198.51.100.9"},
		{"trusted IPv6 proxy", "[fd00::1]:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.9"}}, proxied, "198.51.100.9"},
		{"not an address", "pipe", nil, proxied, "pipe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = tt.remote
			for k, vs := range tt.headers {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			assert.Equal(t, tt.want, tt.r.Key(req))
		})
	}
}

func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	ps, err := ParsePrefixes([]string{"10.1.2.3/8", "::1", "::ffff:10.0.0.0/104"})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.0/8", ps[0].String())
	assert.Equal(t, "::1/128", ps[1].String())
	assert.True(t, New(ps).trusts(mustAddr("10.200.0.1")), "a mapped prefix trusts IPv4 addresses")
	_, err = ParsePrefixes([]string{"10.0.0.0/33", "proxy.local", "10.0.0.0/8"})
	require.Error(t, err)
	assert.ErrorContains(t, err, `"10.0.0.0/33" is not a CIDR prefix`)
	assert.ErrorContains(t, err, `"proxy.local"`)
}

func mustAddr(s string) netip.Addr {
	a, _ := parseHop(s)
	return a
}
