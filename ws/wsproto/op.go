package wsproto

// Ops of the client's frames.
const (
	OpAuth        = "AUTH"
	OpPublish     = "PUBLISH"
	OpSubscribe   = "SUBSCRIBE"
	OpUnsubscribe = "UNSUBSCRIBE"
	OpAck         = "ACK"
	OpNack        = "NACK"
	OpModAck      = "MODACK"
	OpPause       = "PAUSE"
	OpResume      = "RESUME"
)

// Ops of the server's frames.
const (
	OpOK    = "OK"    // the answer to a frame that succeeded
	OpErr   = "ERR"   // the answer to a frame that failed, with a [Code]
	OpEvent = "EVENT" // an event delivered to a subscription
	OpGap   = "GAP"   // seqs a live subscription does not deliver, with the reason
)

// Slow policies: what the server does when a live subscription falls
// behind the queue it keeps for it (the "slow" option of a live
// SUBSCRIBE).
const (
	// SlowClose: the server closes the connection with
	// [CloseSlowSubscriber]; the client reconnects and resumes with since.
	// The default.
	SlowClose = "close"
	// SlowSkip: the server drops what it had queued for the subscription
	// and says so with a GAP of reason [GapSlow]; the subscription goes on
	// with the newest events.
	SlowSkip = "skip"
)

// Reasons of a GAP frame.
const (
	GapDeleted = "deleted" // retention or compaction deleted the events before they were sent
	GapSlow    = "slow"    // the subscriber fell behind and they were dropped (SlowSkip)
)

// Published is the answer to a publish, over WebSocket (the id and seq of
// the OK of a PUBLISH) and over HTTP (the JSON body of a 200): the stored
// event's id and seq. A publish of an id the topic already held answers
// the stored event's.
type Published struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
}
