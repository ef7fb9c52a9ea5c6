// Package compaction keeps compacted and raw topics in shape: it
// publishes snapshots of compacted topics, prunes what their policies let
// go, and warms consumers from the latest state.
//
// # Policies
//
// A [TopicPolicy] names a topic and how it is kept. A compacted topic keeps the
// latest record of each key (the store maintains latest-by-key as records
// are written, see [event.KeyStore]); its superseded records older than
// MinAge are deleted. A raw topic keeps its records for Retention; a
// consumer group that falls behind it is told and moves on (see package
// event).
//
// # Snapshots
//
// For a compacted topic with a SnapshotTopic, the [Compactor] tracks which
// keys changed (through a consumer group, so it survives restarts) and
// every Interval publishes the latest record of each changed key to the
// snapshot topic, with headers naming the source seq. Keys that did not
// change are not published again, and a run after no change publishes
// nothing. Snapshot ids are derived from the source record, so a run
// repeated after a crash stores nothing twice.
//
// # Cold start
//
// [Warm] loads the latest state of every key and hands over to a live
// subscription from the right seq: nothing missed, nothing applied twice.
package compaction
