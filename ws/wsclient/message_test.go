package wsclient

import (
	"context"
	"testing"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seen is what the shared handler saw of one message.
type seen struct {
	topic, group, payload string
	attempt               int
	deadline              bool // the message had a lease deadline
}

// settleSecond is a handler of event.Message, settling by hand: it nacks
// the first attempt of a record and acks the second, and reports each
// call on out.
func settleSecond(out chan<- seen) func(ctx context.Context, m event.Message) error {
	return func(ctx context.Context, m event.Message) error {
		rec, info := m.Event(), m.Info()
		out <- seen{topic: rec.Topic, group: info.Group, payload: string(rec.Payload), attempt: info.Attempt, deadline: !info.Deadline.IsZero()}
		if info.Attempt == 1 {
			return m.Nack(ctx, "first attempt")
		}
		if err := m.ModAck(ctx, time.Minute); err != nil {
			return err
		}
		return m.Ack(ctx)
	}
}

// One handler function runs unchanged on an in-process subscription of a
// Bus and on a client subscription over the gateway: both see the record,
// the group and the attempt, and both settle through the interface (a
// nack, then a ModAck and an ack that commit the groups' cursors).
func TestMessageHandlerRunsInProcessAndOverTheWire(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	e := newEnv(t, func(c *ws.Config) { c.Clock = clk })
	c := e.client(nil)
	ctx := context.Background()

	inproc, wire := make(chan seen, 4), make(chan seen, 4)
	bill, wired := settleSecond(inproc), settleSecond(wire)
	sub, err := e.bus.Subscribe(ctx, "orders", "local", func(ctx context.Context, d *event.Delivery) error {
		return bill(ctx, d)
	}, event.WithManualAck(), event.FromEarliest())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	csub, err := c.Subscribe(ctx, "orders", "remote", func(ctx context.Context, m *Message) error {
		return wired(ctx, m)
	}, event.WithManualAck(), event.FromEarliest())
	require.NoError(t, err)
	t.Cleanup(func() { _ = csub.Close() })

	pub, err := c.Publish(ctx, "orders", []byte(`{"n":1}`))
	require.NoError(t, err)

	for _, side := range []struct {
		group string
		ch    chan seen
	}{{"local", inproc}, {"remote", wire}} {
		first := nextAdvancing(t, clk, side.ch)
		assert.Equal(t, seen{topic: "orders", group: side.group, payload: `{"n":1}`, attempt: 1, deadline: true}, first, side.group)
		second := nextAdvancing(t, clk, side.ch)
		assert.Equal(t, 2, second.attempt, side.group)
		require.Eventually(t, func() bool {
			cur, err := e.bus.Cursor(ctx, "orders", side.group)
			return err == nil && cur.Seq == pub.Seq
		}, 10*time.Second, 5*time.Millisecond, "the ack of group %s commits its cursor", side.group)
	}
}
