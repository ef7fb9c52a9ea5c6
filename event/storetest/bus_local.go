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
// time, so each key's records are handled in seq order. The runs use
// topics of their own: 30 over an in-process store (the memory store), 6 over a store behind a
// server (a run takes seconds there, most of it the group's start and
// rebalance over the network).
func testLocalSubscriptionsKeepOrder(t *testing.T, s event.Store) {
	const subs, events, keys = 3, 60, 6
	runs := 6
	if _, ok := s.(event.InProcessStore); ok {
		runs = 30
	}
	violations := 0
	for run := range runs {
		violations += localOrderRun(t, s, "t"+strconv.Itoa(run), subs, events, keys)
	}
	assert.Zero(t, violations, "records of a key handled out of seq order in %d runs", runs)
}

// localOrderRun publishes events records over keys to subs subscriptions
// in each of two Buses and returns how many were handled before a record
// of their key with a lower seq.
func localOrderRun(t *testing.T, s event.Store, topic string, subs, events, keys int) int {
	bs := partitionedBuses(t, s, 2)
	all := newCollector()
	var ss []*event.Subscription
	for _, b := range bs {
		for range subs {
			ss = append(ss, subscribe(t, b, topic, "g", func(ctx context.Context, d *event.Delivery) error {
				all.add(d)
				return nil
			}, event.FromEarliest(), event.WithMaxInFlight(1)))
		}
	}
	publishKeyed(t, bs[0], topic, events, keys)
	require.Eventually(t, func() bool { return all.distinct() == events }, wait, tick)
	violations := 0
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
	return violations
}
