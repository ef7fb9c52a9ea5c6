// Package ops serves the operator's view of an [event.Bus]: JSON endpoints
// for topics, cursors, lag, deliveries in flight, the latest record of a
// key and dead-lettered records, a redrive of dead-lettered records, and
// a dashboard page that shows it live. [NewHandler] returns an
// [http.Handler] that serves them under [Config.Prefix] (default "/ops").
//
//	h, err := ops.NewHandler(ops.Config{Bus: bus, Verifier: verifier})
//	mux.Handle("/ops/", h) // /ops/ (dashboard), /ops/topics, /ops/lag, ...
//
// # Guarantees
//
//   - Reads need [acl.Inspect] on the topic they name, redrive needs
//     [acl.Admin]; listings show only what the caller may inspect. Checks
//     answer in the order 401, 400 (the message names the parameter), 403,
//     so a caller without a valid token learns no topic name.
//   - Lag is read from the stored cursor and the topic's head
//     ([event.Bus.Lag]), never from counts kept by hand.
//   - A redrive publishes each dead-lettered record once (ids derived from
//     the dead letter's, a redrive cursor), however often it is asked.
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
