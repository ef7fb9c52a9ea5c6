package mongostore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// TestGroupStateSurvivesRestart: acks above an un-acked record and the
// attempt count are in the database, so a new Store and Bus on it (a
// restarted process) deliver only the un-acked record, at attempt 2.
func TestGroupStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	ctx := context.Background()
	opts := []event.SubscribeOption{event.FromEarliest(), event.WithManualAck(), event.WithMaxInFlight(20), event.WithAckTimeout(time.Minute)}
	cfg := event.Config{PollInterval: 20 * time.Millisecond, CommitInterval: 5 * time.Millisecond}

	s1 := newStoreIn(t, db, nil)
	b1, err := event.NewBus(s1, cfg)
	require.NoError(t, err)
	var mu sync.Mutex
	var got []*event.Delivery
	_, err = b1.Subscribe(ctx, "t", "g", func(_ context.Context, d *event.Delivery) error {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
		return nil
	}, opts...)
	require.NoError(t, err)
	var first event.Record
	for i := range 20 {
		r, err := b1.Publish(ctx, "t", []byte(`{}`))
		require.NoError(t, err)
		if i == 0 {
			first = r
		}
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 20 }, 30*time.Second, 5*time.Millisecond)
	for _, d := range got {
		if d.ID != first.ID {
			require.NoError(t, d.Ack(ctx))
		}
	}
	// The state is written with the cursor commits, not only on Close.
	p := event.PartitionRef{Topic: "t", Group: "g"}
	require.Eventually(t, func() bool {
		st, err := s1.GroupState(ctx, p)
		return err == nil && len(st.Settled) == 19 && st.Attempts[first.Seq] == 1
	}, 30*time.Second, 5*time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, b1.Close(cctx))
	require.NoError(t, s1.Close(cctx))

	s2 := newStoreIn(t, db, nil)
	b2, err := event.NewBus(s2, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b2.Close(context.Background()) })
	again := make(chan *event.Delivery, 20)
	_, err = b2.Subscribe(ctx, "t", "g", func(_ context.Context, d *event.Delivery) error {
		again <- d
		return nil
	}, opts...)
	require.NoError(t, err)
	var d *event.Delivery
	select {
	case d = <-again:
	case <-time.After(30 * time.Second):
		t.Fatal("the un-acked record never came back")
	}
	assert.Equal(t, first.ID, d.ID, "only the un-acked record comes back")
	assert.Equal(t, 2, d.Attempt, "its attempts go on across the restart")
	require.NoError(t, d.Ack(ctx))
	require.Eventually(t, func() bool {
		c, err := b2.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == 20
	}, 30*time.Second, 5*time.Millisecond)
	assert.Empty(t, again, "no acked record is delivered again")
	require.Eventually(t, func() bool {
		st, err := s2.GroupState(ctx, p)
		return err == nil && len(st.Attempts)+len(st.Settled) == 0
	}, 30*time.Second, 5*time.Millisecond, "the state the cursor passed is forgotten")
}
