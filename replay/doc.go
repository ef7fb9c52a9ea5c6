// Package replay serves a topic's stored records over HTTP: pages of
// records from any start (GET /replay), a streamed export of a time range
// (GET /export, NDJSON or one JSON array) and the latest record per key
// (GET /latest). A [Handler] is an [http.Handler] over any [event.Store];
// mount it in a host's mux.
//
//	h, err := replay.NewHandler(replay.Config{Store: store, Verifier: verifier})
//	mux.Handle("/v1/", h) // /v1/replay, /v1/export, /v1/latest
//
// # Guarantees
//
//   - Records are read and paged by seq, never by ts or id, so no record
//     that shares a timestamp with the end of a page is skipped.
//   - An export streams with constant memory, holds every record of its
//     range exactly once in seq order up to the head as the request
//     arrived, and a store failure after the first byte aborts the
//     response: never a short export that looks complete. Each page gets
//     its own write deadline ([Config.ExportWriteTimeout]).
//   - With [Config.Verifier] every request needs a bearer token whose
//     policy allows [acl.Replay] on the topic. Checks answer in this order:
//     405, 401, 400 (the message names the parameter), 403, then the
//     store's 404, 501 or 500, with the JSON error body of every promlib
//     endpoint.
//
// Parameters, answers and error codes of each endpoint: docs/REPLAY.md of
// the repository.
package replay
