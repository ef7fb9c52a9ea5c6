package event

import (
	"cmp"
	"slices"
	"time"
)

// DeliveryState is a record a group holds in this Bus and has not settled:
// in flight at a subscriber, or waiting for a redelivery or for the
// dead-letter topic.
type DeliveryState struct {
	Seq       uint64 `json:"seq"`
	ID        string `json:"id"`
	Partition int    `json:"partition"`
	// State is "in_flight", "waiting" (backoff), "retry" (due) or
	// "dead_letter" (being moved to the dead-letter topic).
	State string `json:"state"`
	// Attempt is the number of the last delivery attempt started.
	Attempt int `json:"attempt"`
	// Deadline is when the lease (in flight) or the backoff (waiting) ends.
	Deadline time.Time `json:"deadline"`
	// Reason is the reason of the last nack, if any.
	Reason string `json:"reason,omitempty"`
}

var deliveryStates = map[entryState]string{stInflight: "in_flight", stWaiting: "waiting", stRetry: "retry", stDLQ: "dead_letter"}

// Deliveries returns the records group on topic holds in this Bus and has
// not settled, by seq; none for a group without subscribers here. The
// store's group state ([GroupStateStore]) has the attempts of every
// member's.
func (b *Bus) Deliveries(topic, group string) []DeliveryState {
	b.mu.Lock()
	g := b.groups[groupKey{topic, group}]
	b.mu.Unlock()
	out := []DeliveryState{}
	if g == nil {
		return out
	}
	g.mu.Lock()
	for _, e := range g.unsettled() {
		st, ok := deliveryStates[e.state]
		if !ok {
			continue
		}
		out = append(out, DeliveryState{Seq: e.d.Seq, ID: e.d.ID, Partition: e.d.Partition, State: st,
			Attempt: e.attempt, Deadline: e.deadline, Reason: e.reason})
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b DeliveryState) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}
