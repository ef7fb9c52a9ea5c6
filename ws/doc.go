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
// Additions a client may ignore: ACK, NACK and MODACK may name the attempt
// they settle ("attempt", from ctx.attempt); without it the gateway settles
// the attempt it sent last for that id. The ERR codes are the [Code]
// constants.
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
// optional [Authorizer] checks publish and subscribe (ERR forbidden).
// [StaticTokens] is the built-in shared-secret authenticator and
// [OpenAccess] accepts anyone; JWTs come from the auth package. AUTH on an
// authenticated connection refreshes the token: the new principal replaces
// the old one, and subscriptions it may not hold end with an ERR forbidden.
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
// for curl and tests.
package ws
