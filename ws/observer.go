package ws

import (
	"time"

	"github.com/promethean/promlib/ws/wsproto"
)

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
	Handled(op string, code wsproto.Code, took time.Duration)
	// Sent is called when an EVENT frame has been written to a client;
	// group is "" for a live subscription's.
	Sent(topic, group string)
	// LiveSubscribers is called when the live subscribers of topic on the
	// gateway change, by delta (+1 or -1).
	LiveSubscribers(topic string, delta int)
	// LiveDropped is called when a live subscriber of topic fell behind its
	// connection's live queue, with its slow policy: "close" (the
	// connection is closed with wsproto.CloseSlowSubscriber) or "skip" (its queued
	// events were dropped for a GAP).
	LiveDropped(topic, policy string)
	// LiveRecovered is called when a live SUBSCRIBE with since has queued
	// what the store held after since, with the number of records it read
	// for that.
	LiveRecovered(topic string, records int)
}

// NopObserver implements [Observer] with methods that do nothing.
type NopObserver struct{}

var _ Observer = NopObserver{}

func (NopObserver) Connected()                                  {}
func (NopObserver) Disconnected(int, time.Duration)             {}
func (NopObserver) Handled(string, wsproto.Code, time.Duration) {}
func (NopObserver) Sent(string, string)                         {}
func (NopObserver) LiveSubscribers(string, int)                 {}
func (NopObserver) LiveDropped(string, string)                  {}
func (NopObserver) LiveRecovered(string, int)                   {}
