// Command promctl operates a promlib hub (examples/hub) from the command
// line: it publishes and follows events, lists topics and consumer groups
// with their lag, looks at what is in flight, handles dead letters, moves
// and deletes groups, exports and imports topics, and reads and
// registers schemas. It talks to a running hub over its HTTP endpoints
// (the ops endpoints under /ops, /replay and /export, POST
// /publish/{topic}) and its WebSocket API (package ws/wsclient), so it
// needs nothing but the hub's URL and a token.
//
//	go install github.com/promethean/promlib/cmd/promctl@latest
//
// # Usage
//
//	promctl [-url URL] [-token TOKEN] COMMAND [ARGS] [FLAGS]
//
//	promctl publish TOPIC [PAYLOAD] [-key K] [-header k=v]... [-o table|json]
//	promctl tail TOPIC [-from earliest|latest|seq:N|ts:MS] [-group G] [-n COUNT] [-o table|json]
//	promctl topics [TOPIC] [-o table|json]
//	promctl groups [TOPIC] [-o table|json]
//	promctl lag [TOPIC [GROUP]] [-o table|json]
//	promctl inflight [TOPIC [GROUP]] [-o table|json]
//	promctl dlq list|redrive|purge TOPIC GROUP [-ids ID,...] [-limit N] [-after SEQ] [-o table|json]
//	promctl cursor reset TOPIC GROUP -to earliest|latest|seq:N|ts:MS [-force] [-o table|json]
//	promctl group delete TOPIC GROUP [-force] [-o table|json]
//	promctl export TOPIC [-from-ts MS] [-to-ts MS] > FILE.ndjson
//	promctl import TOPIC < FILE.ndjson
//	promctl schema get [TOPIC] [-version N] [-o table|json]
//	promctl schema register TOPIC [FILE] [-rule none|backward|forward|full]
//	promctl migrate -from STORE -to STORE [-from-schema S] [-to-schema S] [-from-db D] [-to-db D] [-batch N] [-o table|json]
//	promctl backup [-name FILE] [-o table|json]
//	promctl help [COMMAND]
//
// "promctl COMMAND -h" describes each command and its flags. Flags may
// come before or after the arguments; "--" ends them (for a payload that
// starts with "-").
//
// # The hub
//
// -url is the hub's base URL, default PROMLIB_URL, else
// http://127.0.0.1:8080 (the hub's default address); https:// works for
// a hub with -tls-cert, and the WebSocket URL is the same host's /ws.
// -token, default PROMLIB_TOKEN, is sent as "Authorization: Bearer" and
// with the WebSocket AUTH: the hub's WS_TOKEN, or a JWT whose scopes
// allow what the command does (publish, subscribe, replay, inspect,
// admin on the topic). -h never prints the token.
//
// # Output and exit status
//
// topics, groups, lag, inflight, dlq list and schema get print aligned
// tables for people; -o json prints the hub's JSON answer (indented) for
// scripts. An error is one line on stderr, naming the problem: for a
// refusal of the hub, its error code and message and the HTTP status,
// such as
//
//	promctl: cursor: conflict: event: group has active subscribers: group "billing" on "orders" has live members [...]: stop them, or force the reset to move them (HTTP 409)
//
// The exit status is 0 on success (and after -h), 1 when the command
// failed (the hub refused, could not be reached, a line of input was
// bad), 2 for a bad command line (the message names the flag or
// argument, and nothing was sent).
//
// # Commands
//
// publish stores PAYLOAD (one JSON value), or each non-blank line of
// stdin as one event, in batches of NDJSON (POST /publish/TOPIC), in
// order, each with the key of -key and the headers of -header; it prints
// each event's seq and id. The first event refused stops it, naming its
// line.
//
// tail follows a topic and prints each event ("#SEQ TIME [key=K] [h=v...]
// PAYLOAD", or with -o json each record as export writes it) until
// interrupted or after -n events. Without -group it is a live viewer (a
// subscription without a group): it changes no cursor and takes nothing
// from any group; -from says where it starts (latest by default). With
// -group G it joins group G, as any member would, and acks each event once
// printed; -from is G's start when G is new, and events delivered beyond
// -n are left unacked, so they go back to G when tail ends.
//
// topics lists the topics: partitions, records, first and last seq, the
// time of the last, bytes, groups and pending dead letters. groups lists
// the groups of every topic or of one: members, committed cursor, head,
// lag, the age of the oldest unsettled record, unsettled records, dead
// letters. lag shows the same for how far behind each group is. inflight
// shows the deliveries the hub holds for its WebSocket subscribers per
// group, and with TOPIC GROUP each unsettled record (state, attempt, lease
// end, reason).
//
// dlq list shows a group's dead letters, oldest first, a page at a time;
// dlq redrive delivers them again to that group only; dlq purge drops
// them. redrive and purge take the dead letters of -ids, else the oldest
// -limit ones.
//
// cursor reset moves a group in every partition: to earliest, latest,
// seq:N (the record of seq N is the group's next) or ts:MS (the first
// record at or after that time; ts also takes an RFC 3339 time). group
// delete deletes a group. Both refuse a group with live members, naming
// them, unless -force.
//
// export writes every record of a topic to stdout, one JSON record a
// line, in seq order up to the head as it starts (-from-ts and -to-ts
// keep a time range); a transfer that breaks off is an error, never a
// short file. import publishes such records to a topic with their ids,
// times, keys, headers, tags and payloads (binary ones too). The hub
// stores a publish whose id the topic already holds as nothing new, so
// importing a file twice, or again after an interruption, stores each
// record once; import says how many records were new and how many the
// topic held already.
//
// schema get lists the topics with a JSON Schema, or prints a topic's
// current schema (-version N: that version); schema register adds the
// schema of FILE or stdin as the topic's next version, checked against
// the topic's evolution rule (-rule sets it). Both need a hub that mounts
// a schema registry (ops.Config.Schemas, which schemaops.New of the
// schema module gives); the stock hub, examples/hub, has none and answers
// not_supported (HTTP 501): promctl exits 1 naming it.
//
// migrate copies one store into another (sqlite:PATH, postgres://...,
// mongodb://..., as the hub's -store), opening both itself, not through
// a hub; stop what writes to the source first. A PostgreSQL store is
// taken in the schema and a MongoDB store in the database the hub would
// use: PG_SCHEMA and MONGO_DB, the hub's variables, for both sides
// (default public and promlib), or -from-schema and -to-schema,
// -from-db and -to-db for one side; such a flag for a store of another
// kind is refused. backup backs the hub's SQLite store up while it runs.
// See their -h.
//
// # Examples
//
//	export PROMLIB_URL=http://127.0.0.1:8080 PROMLIB_TOKEN=secret
//	promctl publish orders '{"id":"o-1","total":12.5}' -key o-1
//	promctl tail orders -from earliest
//	promctl lag
//	promctl dlq list orders billing
//	promctl dlq redrive orders billing
//	promctl cursor reset orders billing -to ts:2026-01-02T15:00:00Z -force
//	promctl export orders > orders.ndjson
//	promctl -url http://new-hub:8080 import orders < orders.ndjson
package main
