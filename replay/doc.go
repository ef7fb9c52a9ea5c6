// Package replay serves a topic's stored records over HTTP: pages of
// records from any start ([Handler.Replay]), a streamed export of a time
// range ([Handler.Export]) and the latest record per key
// ([Handler.Latest]). A [Handler] is an [http.Handler] over any
// [event.Store]; mount it in a host's mux.
//
//	h, err := replay.NewHandler(replay.Config{Store: store, Verifier: verifier})
//	mux.Handle("/v1/", h) // /v1/replay, /v1/export, /v1/latest
//
// Every endpoint takes GET only, and its parameters in the query string.
// An empty value is the same as an absent parameter; a parameter given
// twice, or one the endpoint does not know, is refused (a misspelt fromTs
// would otherwise export the whole topic).
//
// # Order
//
// Records are read in seq order and paged by seq, never by ts or id: many
// records share a timestamp, timestamps need not grow with seq (a
// publisher may set its own), and ids from several processes are not
// ordered. Paging by "last ts + 1", as the seed API did, skips every
// record that shares the last timestamp of a page.
//
// # GET /replay
//
//	topic    required
//	from     earliest (default), latest, seq, ts or afterId
//	seq      with from=seq: the first seq of the page (1 or more)
//	ts       with from=ts: Unix ms; the page starts at the first record,
//	         in seq order, whose ts is at or after it, and goes on in seq
//	         order (as a subscription with event.FromTS does)
//	afterId  with from=afterId: the page starts after this record (404 if
//	         the topic has no record with this id)
//	limit    records per page, 1 to Config.MaxLimit (default 100; max 1000)
//
// The answer is a [ReplayPage]: {"events":[records],"next_seq":N}.
// Records are [event.Record] JSON. The next page is
// from=seq&seq=<next_seq>; a page shorter than limit means the topic held
// no more records at that moment. from=latest gives an empty page whose
// next_seq is one past the head: a starting point for records yet to
// come. Only the parameter of the chosen start is allowed (seq with
// from=ts is refused). A limit over the maximum is refused, not clamped.
//
// # GET /export
//
//	topic   required
//	fromTs  Unix ms, inclusive (default 0)
//	toTs    Unix ms, inclusive (default: no bound); not before fromTs
//	format  ndjson (default: application/x-ndjson, one record a line) or
//	        json (application/json, one array)
//
// The export is streamed with constant memory: it reads
// Config.ExportPageSize records at a time by seq, from the first record
// with ts >= fromTs up to the head of the topic as the request arrived,
// writes those whose ts is within [fromTs, toTs], and flushes after every
// page. Every record in the range comes exactly once, in seq order. Records
// published during the export are not in it. Since ts need not grow with
// seq, the export reads every record from the first at or after fromTs to
// the head, whatever toTs is: a narrow range early in a long topic costs a
// read of the rest of it. A store failure after the
// first byte aborts the response ([http.ErrAbortHandler]): the client sees
// a broken transfer, never a short export that looks complete.
//
// # GET /latest
//
//	topic  required
//	key    the key whose latest record is wanted
//	after  without key: the page holds keys greater than this
//	limit  without key: keys per page, as for /replay
//
// With a key the answer is a [KeyRecord], {"event":record}, or 404 when the
// topic has no record with that key. Without, a [LatestPage],
// {"events":[records],"next_after":"k"}, in key order; next_after is set
// when the page is full. The store must be an [event.KeyStore]; other
// stores are answered 501.
//
// # Authorization
//
// With Config.Verifier (any [auth.Verifier]), every request needs
// "Authorization: Bearer <token>", and its principal's policy must allow
// [acl.Replay] on the topic (scopes such as "replay:orders.**"). A request
// is checked in this order: method (405), token (401), parameters (400),
// authorization of the topic (403), then the store (404, 501, 500).
//
// # Errors
//
// Errors have the body of every HTTP endpoint of promlib:
//
//	{"error":{"code":"bad_request","msg":"limit: 0 is below 1 (want 1 to 1000)"}}
//
// The message of a 400 starts with the name of the parameter (or "query"
// when the query string cannot be parsed). Codes: bad_request (400),
// unauthorized, auth_failed, token_expired (401), forbidden (403),
// not_found (404), method_not_allowed (405), internal (500),
// not_implemented (501), auth_unavailable (503).
package replay
