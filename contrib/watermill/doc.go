// Package watermill adapts a promlib [event.Bus] to Watermill: a
// [Publisher] (message.Publisher) and a [Subscriber]
// (message.Subscriber) over any promlib store, so that Watermill
// routers, middlewares and handlers run on promlib's durable consumer
// groups.
//
// # Mapping
//
//   - A Watermill message becomes a record: its UUID is the record id
//     (publishing it again stores nothing new), its metadata the record's
//     headers, its payload the record's payload, stored as bytes with
//     [Config.ContentType] (application/octet-stream by default; see
//     [event.WithContentType]).
//   - A Subscriber subscribes in its consumer group
//     ([SubscriberConfig.ConsumerGroup]): subscribers of one group share
//     the topic's events, each group gets them all. A group that starts
//     reads the topic from its beginning, so messages published before the
//     first Subscribe are delivered (Watermill's "Persistent").
//   - Ack settles the delivery (the group's cursor moves past it); Nack
//     redelivers it after a fixed 100ms ([DefaultNackBackoff]). Watermill has no dead-letter
//     topic of its own, so by default a message is redelivered until it
//     is acked (MaxAttempts is effectively unbounded); set
//     [SubscriberConfig.SubscribeOptions] to dead-letter after some
//     attempts instead.
//   - The next message is sent only after the previous one is acked or
//     nacked (MaxInFlight 1), which keeps the topic's order for one
//     subscriber, as Watermill requires.
//
// # Features of Watermill's universal test suite
//
// The adapter passes github.com/ThreeDotsLabs/watermill/pubsub/tests over
// the memory store and over event/sqlitestore with ConsumerGroups,
// Persistent, GuaranteedOrder and GuaranteedOrderWithSingleSubscriber
// true and RequireSingleInstance false (instances share the store). These
// are false:
//
//   - ExactlyOnceDelivery: delivery is at least once; a message whose
//     ack is lost with its process (or whose lease ends) is delivered
//     again. Wrap handlers with promlib's dedupe package for exactly-once
//     effects.
//   - NewSubscriberReceivesOldMessages: a group that has acked a message
//     does not get it again; only a new group reads the topic from the
//     start.
//   - ContextPreserved: the publisher's message context does not travel
//     with the message (trace context does, in headers, with contrib/otel).
//
// The suite runs with ForceShort, its own option for smaller message
// counts (for example 100 messages instead of 5000 in
// TestConcurrentSubscribe and 50 instead of 5000 in
// TestContinueAfterSubscribeClose), so that it fits the project's test
// budget beside the other packages; every test of the suite runs. The
// adapter has no code of its own for any store: the suite runs over one
// in-process store and one durable store shared by its instances, and
// the other stores' own behaviour is the conformance suite's
// (event/storetest), run over each of them.
// TestReconnect needs a broker restart command and is skipped, as for
// every Pub/Sub without one.
package watermill
