// Package projector folds an input topic into keyed state and publishes
// each new state to an output topic, the seed's "projector" (heartbeats ->
// process state) made generic.
//
// # Model
//
// A [Projector] is typed by its input payload In and its State. For each
// input record, Key picks the state it updates and Reduce computes the new
// state from the previous one; the new state is published to the output
// topic under its key. The output topic is a compacted topic: its latest
// record per key is the state, and a restarted projector reads it back
// (the store must be an [event.KeyStore]) before it resumes from its
// group's cursor.
//
// # Exactly once per input
//
// Input records are handled one at a time in order. Every output record
// names the input seq it reflects, so an input redelivered after a crash
// (its output was published, its ack was not) is recognised and not
// reduced a second time; its output id is derived from the input, so a
// retried publish stores nothing twice.
//
// # Staleness
//
// With Stale set, every StaleCheck the projector asks it about each key and
// publishes the state it returns when it reports a change, as the seed's
// process table turns "alive" into "stale" for processes that stopped
// beating.
package projector
