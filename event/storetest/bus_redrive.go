package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testRedriveAcrossBuses: a record dead-lettered by a group whose member
// runs in one Bus is redriven by another Bus sharing the store (an
// operator's process with no subscription of the group). The running
// member gets it again, as it was in its topic, without subscribing
// anew; the topic's other group, which acked it, does not.
func testRedriveAcrossBuses(t *testing.T, s event.Store) {
	ctx := context.Background()
	consumer, operator := newBus(t, s), newBus(t, s)
	var failing atomic.Bool
	failing.Store(true)
	billing, audit := newCollector(), newCollector()
	subscribe(t, consumer, "orders", "billing", func(ctx context.Context, d *event.Delivery) error {
		billing.add(d)
		if failing.Load() {
			return errors.New("no price")
		}
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(1))
	subscribe(t, consumer, "orders", "audit", audit.handler, event.FromEarliest())

	orig := pubN(t, operator, "orders", 1)[0]
	var dead []event.Record
	require.Eventually(t, func() bool {
		var err error
		dead, err = s.Read(ctx, event.DeadLetterTopic("orders"), 0, 10)
		return err == nil && len(dead) == 1
	}, wait, tick, "the record was never dead-lettered")
	require.Equal(t, "billing", dead[0].Headers[event.HeaderDLQGroup])
	waitCursor(t, consumer, "orders", "audit", 1)
	require.Equal(t, 1, billing.len())

	failing.Store(false)
	out, err := operator.Redrive(ctx, dead)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, event.RedriveTopic("orders", "billing"), out[0].Topic)

	require.Eventually(t, func() bool { return billing.len() == 2 }, wait, tick,
		"the running member in the other Bus never got the redriven record")
	got := billing.snapshot()[1]
	assert.Equal(t, "orders", got.Topic)
	assert.Equal(t, orig.ID, got.ID)
	assert.Equal(t, orig.Seq, got.Seq)
	assert.Equal(t, dead[0].ID, got.Headers[event.HeaderRedriveFrom])
	waitCursor(t, consumer, event.RedriveTopic("orders", "billing"), "billing", 1)
	assert.Equal(t, 1, audit.len(), "the group that acked the record got it again")
	head, err := s.Head(ctx, event.RedriveTopic("orders", "audit"))
	require.NoError(t, err)
	assert.Zero(t, head, "a redrive stored for the group that acked the record")
}
