// Package ops serves the operator's view of an [event.Bus] over HTTP:
// JSON endpoints for topics, the status of groups ([event.GroupStatus]:
// cursors, lag, members, deliveries), the latest record of a key and the
// dead letters of a group, the admin actions (redrive and purge of dead
// letters, cursor reset, group delete, partitions, schemas), and a
// dashboard page that shows it live. The group admin itself is the Bus's
// ([event.Bus.ResetCursor], [event.Bus.DeleteGroup],
// [event.Bus.RedriveDeadLetters], ...): ops adds HTTP, authorization,
// audit and the page. [NewHandler] returns an [http.Handler] that serves
// them under [Config.Prefix] (default "/ops").
//
//	h, err := ops.NewHandler(ops.Config{Bus: bus, Verifier: verifier})
//	mux.Handle("/ops/", h) // /ops/ (dashboard), /ops/topics, /ops/lag, ...
//
// # Guarantees
//
//   - Reads need [acl.Inspect] on the topic they name, writes need
//     [acl.Admin]; listings show only what the caller may inspect. Checks
//     answer in the order 401, 400 (the message names the parameter), 403,
//     so a caller without a valid token learns no topic name.
//   - Lag is read from the stored cursor and the topic's head
//     ([event.Bus.GroupStatus]), never from counts kept by hand.
//   - A redrive publishes each dead-lettered record once (ids derived from
//     the dead letter's, marks in the store), however often it is asked.
//   - Errors of the Bus map to statuses: [event.ErrInvalid] 400,
//     [event.ErrNotFound] 404, [event.ErrGroupActive] 409 (live members,
//     named), [event.ErrNotSupported] 501.
//   - The dashboard is one page with inline assets under a strict
//     Content-Security-Policy: no external request.
//
// [Handler.Run] samples the charts' history (per topic the publish and
// deliver rates, per group its lag) into memory for Config.ChartWindow;
// GET /ops/charts serves it and the dashboard loads it when it opens.
//
// Every endpoint, its parameters and answers: docs/OPS.md of the
// repository.
package ops
