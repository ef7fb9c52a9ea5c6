package event

import "time"

// Observer receives the bus's events for metrics: those of the life of a
// delivery that no interceptor sees. Publishes and handler calls are seen
// by a [PublishInterceptor] and a [DeliveryInterceptor]. Methods are
// called synchronously on hot paths: keep them cheap and non-blocking.
// Embed [NopObserver] to implement only some of them.
type Observer interface {
	// Delivered is called when a record is handed to a subscriber.
	Delivered(topic, group string, attempt int)
	// Acked is called when a delivery is acked; age is the time since the
	// record's ts.
	Acked(topic, group string, age time.Duration)
	// Nacked is called when a delivery is nacked.
	Nacked(topic, group string)
	// Expired is called when a delivery's lease ends without an ack.
	Expired(topic, group string)
	// DeadLettered is called when a record is moved to the dead-letter topic.
	DeadLettered(topic, group string)
	// Committed is called after a cursor commit of a partition.
	Committed(topic, group string, partition int, seq uint64)
	// Skipped is called when a group fell behind retention and n records
	// were deleted before it could read them.
	Skipped(topic, group string, n uint64)
	// GroupExpired is called when a group is deleted by its expiration
	// policy ([GroupConfig].ExpireAfter).
	GroupExpired(topic, group string)
}

// NopObserver implements [Observer] with methods that do nothing.
type NopObserver struct{}

var _ Observer = NopObserver{}

func (NopObserver) Delivered(string, string, int)         {}
func (NopObserver) Acked(string, string, time.Duration)   {}
func (NopObserver) Nacked(string, string)                 {}
func (NopObserver) Expired(string, string)                {}
func (NopObserver) DeadLettered(string, string)           {}
func (NopObserver) Committed(string, string, int, uint64) {}
func (NopObserver) Skipped(string, string, uint64)        {}
func (NopObserver) GroupExpired(string, string)           {}
