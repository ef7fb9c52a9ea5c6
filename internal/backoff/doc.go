// Package backoff computes retry delays: exponential growth from an
// initial delay up to a maximum, with optional jitter. Every retry loop of
// promlib (redelivery after a nack, the outbox drainer, the client's
// reconnect) uses it.
//
// # Why internal/
//
// It is in internal/ and not below one package because three layers use
// it: the core event (redelivery), outbox (the drainer) and the Go client
// ws/wsclient (reconnect). It imports no promlib package, so the core may.
package backoff
