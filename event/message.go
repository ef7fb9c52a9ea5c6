package event

import (
	"context"
	"time"
)

// Message is one delivered record and the calls that settle it: what a
// handler needs whether the record came from a [Bus] in this process
// (a [*Delivery]) or from a gateway over WebSocket (a *wsclient.Message
// of package ws/wsclient). A handler written against Message runs
// unchanged on either side; each side's handler type takes its concrete
// type, which a one-line function hands on:
//
//	bus.Subscribe(ctx, "orders", "billing", func(ctx context.Context, d *event.Delivery) error { return bill(ctx, d) })
//	client.Subscribe(ctx, "orders", "billing", func(ctx context.Context, m *wsclient.Message) error { return bill(ctx, m) })
//
// What only one side has stays on its type: [Delivery.DeadLetter] and
// [Delivery.Start] in process.
type Message interface {
	// Event returns the delivered record. Its fields are read in place;
	// the handler must not change them.
	Event() *Record
	// Info returns the delivery's group, attempt and lease deadline.
	Info() MessageInfo
	// Ack settles the delivery.
	Ack(ctx context.Context) error
	// Nack ends the delivery unsuccessfully: the record is delivered again
	// after a backoff, or dead-lettered after its last attempt.
	Nack(ctx context.Context, reason string) error
	// ModAck extends the delivery's lease to now+extend.
	ModAck(ctx context.Context, extend time.Duration) error
}

// MessageInfo describes the delivery of a [Message].
type MessageInfo struct {
	// Group is the consumer group the record was delivered to ("" for a
	// message of a live subscription over WebSocket, which has nothing to
	// settle).
	Group string
	// Attempt is 1 for the first delivery and grows with each redelivery.
	Attempt int
	// Deadline is when the lease of this attempt ends unless extended (by
	// the local clock, for a message that came over the wire).
	Deadline time.Time
}

var _ Message = (*Delivery)(nil)

// Event implements [Message]: it returns the delivered record.
func (d *Delivery) Event() *Record { return &d.Record }

// Info implements [Message].
func (d *Delivery) Info() MessageInfo {
	return MessageInfo{Group: d.Group, Attempt: d.Attempt, Deadline: d.Deadline}
}
