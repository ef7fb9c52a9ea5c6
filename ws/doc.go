// Package ws is the WebSocket gateway of promlib: a [Gateway] is an
// http.Handler that serves the frame protocol of docs/PROTOCOL.md over an
// [event.Bus], and its [Gateway.PublishHandler] serves HTTP publish. The
// Go client is package ws/wsclient; the details of this implementation of
// the protocol (its additions, close codes, token refresh) are in
// docs/GATEWAY.md.
//
//	gw, err := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("s3cret")})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/ws", gw)
//	mux.Handle("POST /publish/{topic}", gw.PublishHandler())
//	defer gw.Shutdown(ctx)
//
// Guarantees:
//
//   - Every subscription is a manual-ack subscription of the bus: at least
//     once per group, with the bus's leases; ACK, NACK and MODACK name
//     their attempt, and an ACK of an attempt whose lease ended settles
//     nothing (ack_failed).
//   - SUBSCRIBE's opts keyOrdered and maxPerKey are [event.WithKeyOrdered]
//     and [event.WithMaxPerKey]: the next EVENT of a key is sent once the
//     client settled the one before it, keys in parallel.
//   - A SUBSCRIBE without group is a live subscription: the topic's
//     events from its head (or after since, from the store), in seq order,
//     every skipped seq told by a GAP frame. One reader per topic encodes
//     each event once for all its live subscribers; each connection's live
//     queue is bounded ([Config.LiveQueueEvents], [Config.LiveQueueBytes])
//     and a subscriber that overflows it is closed with
//     [wsproto.CloseSlowSubscriber] or, with slow "skip", skipped with a
//     GAP: it never slows the others or the publishers.
//   - Frames of a connection are answered in order; an error in a frame
//     never closes the connection, except for the close codes of
//     docs/PROTOCOL.md, named in package [wsproto]
//     ([wsproto.CloseTooLarge], [wsproto.CloseAuthTimeout],
//     [wsproto.CloseTokenExpired], [wsproto.CloseTooManyFailedAuth],
//     [wsproto.ClosePingTimeout], [wsproto.CloseSlowSubscriber],
//     [wsproto.CloseGoingAway]).
//   - Refused AUTH are bounded: [Config.MaxFailedAuth] in a row close the
//     connection, and [Config.FailedAuthLimit] limits them per client
//     address ([Config.TrustedProxies] say whose proxy headers count).
//   - A slow reader slows its deliveries down: each connection has a
//     bounded send queue ([Config.SendQueue]); nothing is dropped.
//   - UNSUBSCRIBE, disconnect and [Gateway.Shutdown] give in-flight events
//     back to their groups at once.
//   - The principal is kept per connection; no EVENT is sent after its
//     token expires ([auth.Principal.Expiry]).
package ws
