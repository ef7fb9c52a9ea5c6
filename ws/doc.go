// Package ws is the WebSocket gateway of promlib and its Go client. The
// [Gateway] is an http.Handler that speaks the frame protocol of
// PROTOCOL.md (the seed documents' protocol, made precise) over an
// [event.Bus]; [Dial] returns a [Client] that speaks it from Go.
//
// # Protocol
//
// One JSON object per text message. A client sends AUTH first, then
// PUBLISH, SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, MODACK, PAUSE and RESUME;
// every frame is answered with OK or ERR{code, msg}, echoing the frame's
// corr. Frames of a connection are handled in order, so answers come in the
// order of the frames. After SUBSCRIBE's OK, EVENT frames carry
// ctx{attempt, ack_deadline_ms} (milliseconds left of the lease).
//
// Additions a client may ignore:
//
//   - ACK, NACK and MODACK may carry "attempt", the ctx.attempt of the
//     EVENT they settle: {"op":"ACK","topic":"t","group":"g","id":"...",
//     "attempt":2}. An integer; 0 or absent means "the attempt this
//     connection was sent last for that id", a negative one is
//     bad_frame. It fences the settlement: if the lease of that attempt
//     has ended (the deadline passed and the event went back to the
//     group, where another consumer may hold it as attempt 3), an ACK is
//     answered ack_failed and settles nothing, a NACK is answered OK (the
//     event is delivered again anyway) and a MODACK unknown_id. Without
//     it, a late ACK could settle a redelivery another consumer holds. An
//     id that is not in flight on the subscription any more is answered
//     OK by ACK and NACK (acks are idempotent) and unknown_id by MODACK,
//     whatever the attempt. The Go client always sends it
//     ([Message.Ack]).
//   - An ERR that answers no frame (no corr) but ends a subscription
//     carries its "topic" and "group" (after a re-AUTH, see
//     Authentication).
//
// The ERR codes are the [Code] constants.
//
// # Delivery
//
// Every subscription is a manual-ack subscription of the bus: the lease is
// the bus's, and ACK, NACK and MODACK map to [event.Bus.Ack], Nack and
// ModAck with the attempt the gateway keeps per event id (fenced acks: an
// ACK of an attempt whose lease ended is answered ack_failed and settles
// nothing; an ACK or NACK of an id no longer in flight is answered OK).
// UNSUBSCRIBE and disconnect give the subscription's in-flight events back
// to the group at once.
//
// # Backpressure and memory
//
// Each connection has one writer goroutine and a send queue of
// [Config.SendQueue] frames. The bus delivers at most max in-flight events
// per subscription; the gateway's handler puts each EVENT on the queue and,
// when the queue is full, waits, so that a client that reads slowly slows
// its deliveries down and never makes the gateway buffer without bound or
// drop anything. PAUSE stops EVENTs of a subscription (none is queued after
// the OK); the delivery rate limit paces them.
//
// # Close codes
//
// A frame error never closes the connection, except:
//
//   - 1009 ([CloseTooLarge]): a frame over [Config.ReadLimit].
//   - 4408 ([CloseAuthTimeout]): no successful AUTH within [Config.AuthTimeout].
//   - 4401 ([CloseTokenExpired]): the principal's token expired without a refreshing AUTH.
//   - 4504 ([ClosePingTimeout]): no pong within [Config.PingTimeout]; the
//     peer is not answering, so the socket is dropped without a close
//     handshake (the code is what [Observer] sees).
//   - 1001 ([CloseGoingAway]): [Gateway.Shutdown].
//
// # Authentication
//
// An [Authenticator] turns the AUTH token into a [Principal], whose
// optional [Authorizer] checks PUBLISH and SUBSCRIBE (ERR forbidden).
// [JWTAuthenticator] verifies JSON Web Tokens with an [auth.Verifier] and
// authorizes with the token's [acl.Policy] (claims "policy" or "scopes",
// e.g. "publish:a.*"); [StaticTokens] is the shared-secret authenticator
// and [OpenAccess] accepts anyone. The principal is kept per connection,
// never globally. An expired token is answered token_expired, any other
// refused token auth_failed, and signing keys that cannot be fetched
// internal (try again).
//
// A token expires at [Principal.ExpiresAt]; for a JWT that is exp plus
// the verifier's leeway, the instant from which auth.Verifier refuses the
// token, so that a token is good on a live connection exactly as long as
// it would pass AUTH or an HTTP endpoint. From then on the connection gets
// no EVENT: the writer checks the expiry before every EVENT it sends, not
// only by a timer, and an EVENT due after expiry is not sent (its lease
// goes back to the group). Frames other than AUTH are answered
// token_expired, and the connection is closed with [CloseTokenExpired]
// (4401) at once.
//
// To keep the connection, the client sends AUTH again with a fresh token
// before expiry ([Client.Auth] in Go). The new token must be for the same
// subject: one for another subject is refused with auth_failed and the
// old principal stays (with its expiry). Accepted, the new principal
// replaces the old one (its expiry and its policy), subscriptions are
// kept, and each subscription the new policy does not allow is ended with
// an ERR forbidden that names its topic and group (its in-flight events
// go back to the group). A refused re-AUTH changes nothing.
//
// # Client
//
// [Client.Publish] waits for the OK and returns the id and seq; it gives
// every publish an id, so that one cut off by a lost connection is sent
// again without being stored twice. [Client.Subscribe] calls a [Handler]
// per [Message]: returning nil acks, an error nacks, or with
// event.WithManualAck the handler settles with [Message.Ack], Nack and
// ModAck (which name their attempt). [PublishJSON] and [SubscribeJSON]
// add typed payloads. A lost connection is dialled again with backoff,
// authenticated (TokenFunc may give a fresh token) and subscribed again,
// paused subscriptions paused again; durable groups lose nothing meanwhile.
//
// # HTTP publish
//
// [Gateway.PublishHandler] serves POST /publish/{topic} with a JSON body,
// for curl and tests. It takes "Authorization: Bearer <token>", checked
// by the gateway's Authenticator and the principal's Authorizer exactly as
// AUTH and PUBLISH are. Its errors, like those of every HTTP endpoint of
// promlib, are {"error":{"code":"...","msg":"..."}} ([auth.ErrorBody]):
// 401 unauthorized, auth_failed or token_expired, 403 forbidden, and the
// protocol's other codes with their HTTP statuses.
//
// Other HTTP endpoints (replay, export, ops) take the same tokens with the
// same verifier and policy through the auth package: wrap them in
// [auth.Middleware](verifier), which answers 401 by itself, and check
// each request with [auth.Authorize](r.Context(), acl.Replay, topic, ""),
// passing a refusal to [auth.WriteError] (403).
package ws
