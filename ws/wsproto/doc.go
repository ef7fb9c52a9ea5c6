// Package wsproto is the Go form of the WebSocket protocol of
// docs/PROTOCOL.md: the names both ends use, shared by the gateway
// (package ws), the Go client (package ws/wsclient) and HTTP publish.
//
// # Vocabulary
//
//   - the ops of frames: the client's ([OpAuth], [OpPublish], ...) and the
//     server's ([OpOK], [OpErr], [OpEvent], [OpGap]);
//   - the error codes of ERR frames and HTTP error bodies ([Code]), the
//     protocol [Error] that carries one, and a sentinel per code for
//     errors.Is ([ErrForbidden], ...);
//   - the WebSocket close codes the gateway ends a connection with
//     ([CloseTokenExpired], ...);
//   - the slow policies of a live subscription ([SlowClose], [SlowSkip])
//     and the reasons of a GAP ([GapDeleted], [GapSlow]);
//   - [Published], the answer to a publish: the stored event's id and seq.
//
// An error of the gateway and an error the client returns are the same
// [*Error] type, so one errors.Is works on either side:
//
//	if errors.Is(err, wsproto.ErrForbidden) { ... }
package wsproto
