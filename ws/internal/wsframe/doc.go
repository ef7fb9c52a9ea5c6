// Package wsframe is the codec of the WebSocket protocol of
// docs/PROTOCOL.md, shared by the gateway (package ws) and the Go client
// (package ws/wsclient): the frames. Their vocabulary (ops, error codes,
// the protocol error) is the public package ws/wsproto.
//
// Client frames are decoded by [Decode], which checks that each op has
// the fields it needs; server frames are written by hand by the Append
// functions (the hot path of delivery) and read by [DecodeServer]. The
// fast decoders accept only what they decode exactly as encoding/json
// would and leave everything else to it; the tests fuzz them against it.
package wsframe
