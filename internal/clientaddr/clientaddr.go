package clientaddr

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParsePrefixes parses trusted proxies: CIDR prefixes ("10.0.0.0/8",
// "fd00::/8") or single addresses ("192.0.2.7", one host). Every bad item
// is reported, joined, each naming the item.
func ParsePrefixes(items []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(items))
	var errs []error
	for _, s := range items {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		errs = append(errs, fmt.Errorf("%q is not a CIDR prefix (such as 10.0.0.0/8 or fd00::/8) or an IP address", s))
	}
	return out, errors.Join(errs...)
}

// Resolver tells the client address of requests; the zero value trusts
// no proxy. It is safe for concurrent use.
type Resolver struct {
	trusted []netip.Prefix
}

// New returns a resolver that trusts the proxies of trusted.
func New(trusted []netip.Prefix) *Resolver {
	ps := make([]netip.Prefix, 0, len(trusted))
	for _, p := range trusted {
		if p.IsValid() {
			ps = append(ps, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-unmapBits(p)).Masked())
		}
	}
	return &Resolver{trusted: ps}
}

// unmapBits is how many bits a prefix of an IPv4-mapped IPv6 address
// loses when unmapped.
func unmapBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return min(96, p.Bits())
	}
	return 0
}

func (r *Resolver) trusts(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Addr returns the client address of req, and false when req.RemoteAddr
// is not an IP address (then Key falls back to it as it is).
func (r *Resolver) Addr(req *http.Request) (netip.Addr, bool) {
	peer, ok := parseHop(req.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if len(r.trusted) == 0 || !r.trusts(peer) {
		return peer, true
	}
	fwd, hasFwd := r.walk(peer, forwardedHops(req.Header.Values("Forwarded")))
	xff, hasXFF := r.walk(peer, xffHops(req.Header.Values("X-Forwarded-For")))
	switch {
	case hasFwd && hasXFF:
		if fwd == xff {
			return fwd, true
		}
		return peer, true
	case hasFwd:
		return fwd, true
	case hasXFF:
		return xff, true
	}
	return peer, true
}

// Key returns the key of req's client for per-client limits: its IPv4
// address, or the /64 network of its IPv6 address (one host commonly has
// a whole /64), or RemoteAddr as it is when that is not an address.
func (r *Resolver) Key(req *http.Request) string {
	a, ok := r.Addr(req)
	if !ok {
		return req.RemoteAddr
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// walk returns the client of hops, given from the farthest to the nearest,
// as reported to peer, a trusted proxy; false when there are no hops.
func (r *Resolver) walk(peer netip.Addr, hops []string) (netip.Addr, bool) {
	if len(hops) == 0 {
		return netip.Addr{}, false
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return client, true // a hop we cannot read: its writer is the client
		}
		client = a
		if !r.trusts(a) {
			break
		}
	}
	return client, true
}

// parseHop parses an address with or without a port, IPv6 with or without
// brackets.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// xffHops splits X-Forwarded-For headers into hops, in order.
func xffHops(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, h := range strings.Split(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	return hops
}

// forwardedHops returns the for= of each element of Forwarded headers, in
// order; an element without one is a hop that is not an address.
func forwardedHops(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, elem := range splitQuoted(v, ',') {
			hop := ""
			for _, pair := range splitQuoted(elem, ';') {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
					hop = strings.Trim(strings.TrimSpace(val), `"`)
				}
			}
			hops = append(hops, hop)
		}
	}
	return hops
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
