// Package clientaddr tells the address of the client of an HTTP request:
// the TCP peer's, or, when the peer is a proxy the server was told to
// trust, the address that proxy reports in Forwarded (RFC 7239) or
// X-Forwarded-For. The edges use it to key per-client limits.
//
// With no trusted proxies the headers are ignored: any client can write
// them. With trusted proxies, the header's hops are read from the right
// (the nearest proxy) and the first hop that is not a trusted proxy is the
// client; a hop that is not an address ("unknown", an obfuscated name)
// stops the walk at the proxy that wrote it. A request that carries both
// headers is keyed by the peer unless both name the same client: which of
// them the proxy wrote and which the client forged cannot be told.
//
// # Why internal/
//
// It is in internal/ and not below ws because the example hub
// (examples/hub) uses it too, to parse its -trusted-proxies flag, and
// Go's internal rule would hide ws/internal from it.
package clientaddr
