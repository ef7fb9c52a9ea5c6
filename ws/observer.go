package ws

import "time"

// Observer receives the gateway's events for metrics. Methods are called
// synchronously on hot paths: keep them cheap and non-blocking. Embed
// [NopObserver] to implement only some of them.
type Observer interface {
	// Connected is called when a WebSocket connection is accepted.
	Connected()
	// Disconnected is called when a connection has ended, with the close
	// code it ended with (see the Close* constants; 1006 when it just
	// dropped) and how long it lasted.
	Disconnected(code int, lasted time.Duration)
	// Handled is called after each client frame (and each HTTP publish,
	// op "HTTP_PUBLISH") with its op ("" when it could not be decoded), the
	// error code answered ("" for OK) and the time it took.
	Handled(op string, code Code, took time.Duration)
	// Sent is called when an EVENT frame has been written to a client.
	Sent(topic, group string)
}

// NopObserver implements [Observer] with methods that do nothing.
type NopObserver struct{}

var _ Observer = NopObserver{}

func (NopObserver) Connected()                          {}
func (NopObserver) Disconnected(int, time.Duration)     {}
func (NopObserver) Handled(string, Code, time.Duration) {}
func (NopObserver) Sent(string, string)                 {}
