// Package ops serves the operator's view of an [event.Bus]: JSON endpoints
// for topics, cursors, lag, deliveries in flight, the latest record of a
// key and dead-lettered records, a redrive of dead-lettered records, and
// a dashboard page that shows it live.
//
// # Endpoints
//
// [NewHandler] returns an http.Handler that serves, under
// [Config.Prefix] (default "/ops"):
//
//	GET  /ops/                  the dashboard (HTML)
//	GET  /ops/topics[?topic=]   each known topic: head, retention floor, groups with
//	                            their lag and in-flight counts, dead-letter topic
//	GET  /ops/cursors?topic=    the committed cursor of each known group
//	GET  /ops/lag?topic=&group= lag in events and in ms (event.GroupLag)
//	GET  /ops/inflight[?topic=] deliveries in flight, waiting and buffered per group in this Bus
//	GET  /ops/latest?topic=&key= the latest record of key (needs an event.KeyStore)
//	GET  /ops/dlq?topic=[&after=&limit=] records of the dead-letter topic
//	POST /ops/dlq/redrive?topic=[&limit=] publish dead-lettered records back to their topic
//
// Every answer is JSON. Bad input gets 400 with the body
// {"error":{"code":"bad_request","msg":"..."}} (the shape of
// [auth.WriteError]) whose message names the parameter: a missing, empty,
// repeated or unknown parameter, a bad topic or group name, a number out
// of range. A group without a cursor and a key without a record get 404
// not_found, a store that cannot answer 501 not_supported, a wrong method
// 405. POST parameters may also come as a JSON object body.
//
// # Topics and groups
//
// The stores cannot list their topics or the groups of a topic, so a
// Handler knows the topics of [Config.Topics], those with subscribers in
// the Bus ([event.Bus.Stats]) and those a [TopicLister] lists; and, per
// topic, the groups of [Config.Groups], those with subscribers in the Bus
// and those a [GroupLister] lists. A group shows once it has a committed
// cursor.
//
// # Lag
//
// [Lag] compares the group's stored cursor with the topic's head: lag in
// events is head - committed (exact with one partition, an upper bound
// with several), lag in ms is the age of the oldest record the group has
// not settled. Cursors are committed every [event.Config.CommitInterval],
// so an ack shows in the lag after that.
//
// # Dead letters
//
// The Bus moves a record that failed its last attempt to the topic's
// dead-letter topic "<topic>.dlq" ([event.DeadLetterTopic]) with x-dlq-* headers.
// /ops/dlq peeks at it; by default from the redrive cursor, so that it
// shows what was not redriven yet. [Handler.Redrive] (POST
// /ops/dlq/redrive) publishes those records back to the topic with a new
// id derived from the dead-lettered record's, and moves the redrive cursor
// (the cursor of [Config.RedriveGroup] on the dead-letter topic) past
// them, so each is redriven once; a repeated redrive stores nothing twice.
// A redriven record reaches every group of the topic.
//
// # Dashboard
//
// GET /ops/ is one HTML page with its style and script inline, no
// external assets, under a Content-Security-Policy that allows only them.
// It polls /ops/topics and /ops/inflight every second (relative URLs, so
// it works under any prefix) and shows topics, groups, lag and in-flight
// counts. A bearer token typed into its token field, or passed as
// #token=... in the URL, is sent with the polls. A browser test finds the
// poll status at [DashboardStatusID] and the rows and cells by the data
// attributes its documentation lists.
//
// # Authorization
//
// With [Config.Verifier] set, every JSON request needs a bearer token
// (401 without a valid one), then valid parameters (400), then the
// principal's policy must allow [acl.Inspect] on the topic a read names
// and [acl.Admin] on the topic a redrive names (403; scopes such as
// "inspect:orders.**", "admin:orders.**"). Requests about every topic need
// a valid token only, and list only the topics and groups the principal
// may inspect; a caller without a valid token learns no topic name from
// an error. Without a Verifier anyone who reaches the handler may do
// everything.
package ops
