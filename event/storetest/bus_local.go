package storetest

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testLocalSubscriptionsKeepOrder runs several subscriptions of one group
// in each of two Buses, MaxInFlight 1: the partitions a Bus owns are
// shared out among its subscriptions, one subscription per partition at a
// time, so each key's records are handled in seq order.
func testLocalSubscriptionsKeepOrder(t *testing.T, s event.Store) {
	const runs, subs, events, keys = 30, 3, 60, 6
	violations := 0
	for run := range runs {
		topic, group := "t"+strconv.Itoa(run), "g"
		bs := partitionedBuses(t, s, 2)
		all := newCollector()
		var ss []*event.Subscription
		for _, b := range bs {
			for range subs {
				ss = append(ss, subscribe(t, b, topic, group, func(ctx context.Context, d *event.Delivery) error {
					all.add(d)
					return nil
				}, event.FromEarliest(), event.WithMaxInFlight(1)))
			}
		}
		publishKeyed(t, bs[0], topic, events, keys)
		require.Eventually(t, func() bool { return all.distinct() == events }, wait, tick)
		last := make(map[string]uint64)
		for _, d := range all.snapshot() {
			if d.Seq < last[d.Key] {
				violations++
			}
			last[d.Key] = max(last[d.Key], d.Seq)
		}
		for _, sub := range ss {
			require.NoError(t, sub.Close())
		}
	}
	assert.Zero(t, violations, "records of a key handled out of seq order in %d runs", runs)
}
