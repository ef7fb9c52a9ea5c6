package event_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

type seen struct {
	mu   sync.Mutex
	recs []event.Record
}

func (s *seen) add(r event.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
}

func (s *seen) get() []event.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event.Record(nil), s.recs...)
}

// oneDeadLetter waits for topic's dead-letter topic in st to hold one
// record, and returns it.
func oneDeadLetter(t *testing.T, st event.Store, topic string) []event.Record {
	t.Helper()
	var dead []event.Record
	require.Eventually(t, func() bool {
		var err error
		dead, err = st.Read(context.Background(), event.DeadLetterTopic(topic), 0, 10)
		return err == nil && len(dead) == 1
	}, 10*time.Second, time.Millisecond, "one record in the dead-letter topic of %q", topic)
	return dead
}

// redriveBus returns a memory store and a Bus over it that commits
// cursors often, closed when the test ends.
func redriveBus(t *testing.T) (*event.MemoryStore, *event.Bus) {
	t.Helper()
	st := event.NewMemoryStore()
	b, err := event.NewBus(st, event.Config{CommitInterval: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	return st, b
}

// A record dead-lettered by one group is redriven to that group only: the
// other group of the topic, which acked it, never gets it again; the
// redriven delivery looks like the original (topic, id, seq).
func TestRedriveReachesTheFailingGroupOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := redriveBus(t)
	var err error

	var fail sync.Mutex
	failing := true
	var billing, audit seen
	_, err = b.Subscribe(ctx, "orders", "billing", func(_ context.Context, d *event.Delivery) error {
		billing.add(d.Record)
		fail.Lock()
		defer fail.Unlock()
		if failing {
			return errors.New("no price")
		}
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(1))
	require.NoError(t, err)
	_, err = b.Subscribe(ctx, "orders", "audit", func(_ context.Context, d *event.Delivery) error {
		audit.add(d.Record)
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)

	orig, err := b.Publish(ctx, "orders", []byte(`{"n":1}`))
	require.NoError(t, err)
	dead := oneDeadLetter(t, st, "orders")
	assert.Equal(t, "billing", dead[0].Headers[event.HeaderDLQGroup])
	require.Eventually(t, func() bool { return len(audit.get()) == 1 }, 10*time.Second, time.Millisecond)

	fail.Lock()
	failing = false
	fail.Unlock()
	out, err := b.Redrive(ctx, dead)
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, event.RedriveTopic("orders", "billing"), out[0].Topic)
	_, err = b.Redrive(ctx, dead)
	require.NoError(t, err, "redriving again stores nothing twice")

	require.Eventually(t, func() bool { return len(billing.get()) == 2 }, 10*time.Second, time.Millisecond)
	again := billing.get()[1]
	assert.Equal(t, "orders", again.Topic)
	assert.Equal(t, orig.ID, again.ID)
	assert.Equal(t, orig.Seq, again.Seq)
	assert.Equal(t, dead[0].ID, again.Headers[event.HeaderRedriveFrom])

	// Give a wrong delivery every chance to show, then check: the other
	// group got the record once, billing got it twice.
	_, err = b.Publish(ctx, "orders", []byte(`{"n":2}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(audit.get()) == 2 && len(billing.get()) == 3 }, 10*time.Second, time.Millisecond)
	assert.Len(t, audit.get(), 2)
	assert.Len(t, billing.get(), 3)
	dead, err = st.Read(ctx, event.DeadLetterTopic("orders"), 0, 10)
	require.NoError(t, err)
	assert.Len(t, dead, 1, "the redrive was acked")
}

// A subscription made after the redrive (the group's client had left)
// gets the redriven records.
func TestRedriveWaitsForTheGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := redriveBus(t)
	var err error
	s, err := b.Subscribe(ctx, "orders", "billing", func(context.Context, *event.Delivery) error {
		return errors.New("down")
	}, event.FromEarliest(), event.WithMaxAttempts(1))
	require.NoError(t, err)
	_, err = b.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)
	dead := oneDeadLetter(t, st, "orders")
	require.NoError(t, s.Close())
	_, err = b.Redrive(ctx, dead)
	require.NoError(t, err)

	var got seen
	_, err = b.Subscribe(ctx, "orders", "billing", func(_ context.Context, d *event.Delivery) error {
		got.add(d.Record)
		return nil
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(got.get()) == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "orders", got.get()[0].Topic)
}

func TestRedriveRefusesOtherRecords(t *testing.T) {
	t.Parallel()
	b, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	_, err = b.Redrive(context.Background(), []event.Record{{ID: "x", Topic: "orders.dlq", Payload: []byte(`1`)}})
	assert.ErrorIs(t, err, event.ErrInvalid)
}

// Deliveries shows what a group holds here: in flight with its attempt
// and lease end, then waiting after a nack with its reason.
func TestDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(ctx)) })
	got := make(chan *event.Delivery, 1)
	_, err = b.Subscribe(ctx, "t", "g", func(_ context.Context, d *event.Delivery) error {
		got <- d
		return nil
	}, event.WithManualAck(), event.WithBackoff(time.Hour, time.Hour))
	require.NoError(t, err)
	assert.Empty(t, b.Deliveries("t", "other"))
	r, err := b.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	d := <-got
	ds := b.Deliveries("t", "g")
	require.Len(t, ds, 1)
	assert.Equal(t, r.ID, ds[0].ID)
	assert.Equal(t, r.Seq, ds[0].Seq)
	assert.Equal(t, "in_flight", ds[0].State)
	assert.Equal(t, 1, ds[0].Attempt)
	assert.WithinDuration(t, d.Deadline, ds[0].Deadline, time.Second, "the lease's end")
	require.NoError(t, d.Nack(ctx, "busy"))
	ds = b.Deliveries("t", "g")
	require.Len(t, ds, 1)
	assert.Equal(t, "waiting", ds[0].State)
	assert.Equal(t, "busy", ds[0].Reason)
	assert.True(t, ds[0].Deadline.After(time.Now().Add(50*time.Minute)), "the backoff's end")
}

// A redriven delivery reaches a client as it was in its topic (topic, id):
// the client settles it by that ref ([event.Bus.Ack], as the WebSocket
// gateway does), and the ack reaches the delivery on the redrive topic.
func TestRedrivenDeliverySettledByItsOriginalRef(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := redriveBus(t)
	var err error
	got := make(chan *event.Delivery, 4)
	_, err = b.Subscribe(ctx, "orders", "billing", func(_ context.Context, d *event.Delivery) error {
		got <- d
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(1), event.WithManualAck())
	require.NoError(t, err)
	orig, err := b.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)
	first := <-got
	require.NoError(t, b.Nack(ctx, event.AttemptRef{Topic: "orders", Group: "billing", ID: first.ID, Attempt: first.Attempt}, "no price"))
	dead := oneDeadLetter(t, st, "orders")
	_, err = b.Redrive(ctx, dead)
	require.NoError(t, err)
	again := <-got
	require.Equal(t, orig.ID, again.ID)
	require.Equal(t, "orders", again.Topic)
	ref := event.AttemptRef{Topic: "orders", Group: "billing", ID: again.ID, Attempt: again.Attempt}
	require.NoError(t, b.ModAck(ctx, ref, time.Minute))
	require.NoError(t, b.Ack(ctx, ref))
	require.Eventually(t, func() bool {
		c, err := b.Cursor(ctx, event.RedriveTopic("orders", "billing"), "billing")
		return err == nil && c.Seq == 1
	}, 10*time.Second, time.Millisecond, "the redriven delivery was never settled")
	assert.ErrorIs(t, b.Ack(ctx, ref), event.ErrNotInFlight, "settled once")
}
