package event

import (
	"encoding/json"
	"hash/fnv"
	"time"
)

// Record is a stored event. Field names on the wire follow the seed
// protocol (note caused_by).
//
// Records handed out by a Store or a Bus share their Payload and Headers with
// the store: treat them as read-only.
type Record struct {
	// ID is unique within the topic: a UUIDv7 unless the publisher gave one.
	// Publishing an ID the topic already holds stores nothing new.
	ID string `json:"id"`
	// Seq is the record's position in its topic, assigned by the store,
	// strictly increasing from 1. Order and cursors are by Seq only.
	Seq uint64 `json:"seq"`
	// TS is the publish time in milliseconds since the Unix epoch (or the
	// publisher's own, see [WithTS]); it orders nothing.
	TS        int64             `json:"ts"`
	Topic     string            `json:"topic"`
	Key       string            `json:"key,omitempty"`
	Partition int               `json:"partition"`
	Headers   map[string]string `json:"headers,omitempty"`
	// Payload is one JSON value, unless ContentType names another media
	// type: then it is any bytes (see [Record.IsBinary]). In JSON (a
	// WebSocket frame, a replay) a binary payload is a base64 string
	// beside "payload_encoding": "base64".
	Payload json.RawMessage `json:"payload"`
	// ContentType is the media type of Payload: empty (the default) or a
	// JSON type for JSON, any other for bytes ([WithContentType]).
	ContentType string   `json:"content_type,omitempty"`
	CausedBy    []string `json:"caused_by,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	SID         string   `json:"sid,omitempty"`
}

// Time returns TS as a time.Time.
func (r *Record) Time() time.Time { return time.UnixMilli(r.TS) }

// PartitionOf returns the partition of a record with the given key and id in
// a topic of n partitions: an FNV-1a hash of the key, or of the id when the
// key is empty, so that keyless records spread evenly.
func PartitionOf(key, id string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	if key != "" {
		h.Write([]byte(key))
	} else {
		h.Write([]byte(id))
	}
	return int(h.Sum32() % uint32(n))
}

// DeliveryContext describes one delivery of a record to a subscriber.
type DeliveryContext struct {
	// Attempt is 1 for the first delivery and grows with every redelivery.
	Attempt int `json:"attempt"`
	// MaxAttempts is how many attempts are made before dead-lettering.
	MaxAttempts int `json:"max_attempts"`
	// Deadline is when the lease of this attempt ends unless extended.
	Deadline time.Time `json:"-"`
}

// Cursor is the committed position of a consumer group in a topic: every
// event at or below Seq is settled (acked, dead-lettered or filtered out) in
// every partition. Partitions holds the committed seq of each partition.
type Cursor struct {
	Topic      string         `json:"topic"`
	Group      string         `json:"group"`
	Seq        uint64         `json:"seq"`
	Partitions map[int]uint64 `json:"partitions"`
}
