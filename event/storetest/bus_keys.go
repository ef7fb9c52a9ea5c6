package storetest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// testKeyOrderedMembers runs a key-ordered group over three members with
// manual acks. One key's record fails until every other key's records
// are settled: they must get there while it fails (no head-of-line
// blocking, at any member), and its key keeps its order through the
// retries.
func testKeyOrderedMembers(t *testing.T, s event.Store) {
	const keys, per, stuckAt = 12, 8, 2
	stuckPayload := strconv.Itoa(keys * stuckAt) // key k0's third record
	bs := partitionedBuses(t, s, 3)
	var mu sync.Mutex
	var got []*event.Delivery // every delivery, in the order handlers saw them
	othersDone := make(map[uint64]bool)
	stuckNacks := 0
	for _, b := range bs {
		subscribe(t, b, "t", "g", func(ctx context.Context, d *event.Delivery) error {
			mu.Lock()
			got = append(got, d)
			if d.Key != "k0" {
				othersDone[d.Seq] = true
			}
			wait := string(d.Payload) == stuckPayload && len(othersDone) < (keys-1)*per
			if wait {
				stuckNacks++
			}
			mu.Unlock()
			if wait {
				return d.Nack(ctx, "not before the other keys")
			}
			return d.Ack(ctx)
		}, event.FromEarliest(), event.WithKeyOrdered(), event.WithManualAck(), event.WithConcurrency(4),
			event.WithMaxAttempts(1_000_000), event.WithBackoff(5*time.Millisecond, 100*time.Millisecond))
	}
	waitShares(t, bs)
	publishKeyed(t, bs[0], "t", keys*per, keys)
	waitCursor(t, bs[0], "t", "g", keys*per)

	mu.Lock()
	defer mu.Unlock()
	assert.Positive(t, stuckNacks, "the stuck record failed while the other keys went on")
	checkKeyOrder(t, got)
	seen := make(map[uint64]bool)
	lastStuck, firstAfter := -1, -1
	for i, d := range got {
		seen[d.Seq] = true
		if d.Key != "k0" {
			continue
		}
		switch n, _ := strconv.Atoi(string(d.Payload)); {
		case n == keys*stuckAt:
			lastStuck = i
		case n > keys*stuckAt && firstAfter < 0:
			firstAfter = i
		}
	}
	assert.Len(t, seen, keys*per, "every record delivered")
	require.GreaterOrEqual(t, lastStuck, 0)
	assert.Less(t, lastStuck, firstAfter, "a record of the stuck key was delivered before the stuck one was settled")
}
