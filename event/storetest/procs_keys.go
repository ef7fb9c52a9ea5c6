package storetest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// errHeld nacks a record in a key-ordered helper consumer, holding its key.
var errHeld = errors.New("storetest: held")

// testKeyOrderedKilled runs a key-ordered group over two consumer
// processes. The victim nacks the first attempt of every fifth record and
// backs off for an hour, so each of its keys ends up held behind a failed
// record with the key's later records waiting; it is killed with SIGKILL
// in that state. The survivor takes its partitions over: every record is
// delivered and settled (the cursor never passed a held record), and each
// member saw each key in seq order.
func testKeyOrderedKilled(t *testing.T, sh Shared) {
	store := sh.New(t)
	const (
		topic, group = "ko", "g"
		partitions   = 6
		n, keys      = 240, 24
	)
	env := func(member, nackEvery string) map[string]string {
		return map[string]string{
			"HELPER_TOPIC": topic, "HELPER_GROUP": group, "HELPER_MEMBER": member,
			"HELPER_PARTITIONS": strconv.Itoa(partitions), "HELPER_LEASE_MS": "8000",
			"HELPER_KEY_ORDERED": "1", "HELPER_MAX_INFLIGHT": "300", "HELPER_NACK_EVERY": nackEvery,
		}
	}
	s := openShared(t, sh, store)
	cs, ok := s.(event.CursorStore)
	require.True(t, ok, "a shared store keeps cursors")
	pubs := newBus(t, s, func(c *event.Config) { c.Partitions = partitions })
	publishKeyed(t, pubs, topic, n, keys)

	victim := startHelper(t, "victim", "consume", store, env("victim", "5"))
	// Every key has a multiple of 5 among its first five records: the
	// victim, alone, nacks one record of each key and holds the rest (its
	// MaxInFlight has room for all of them).
	nacked := func(l helperLine) bool { return isDelivery(l) && l.Seq%5 == 0 && l.Attempt == 1 }
	require.Eventually(t, func() bool { return victim.Count(nacked) == keys }, 60*time.Second, 5*time.Millisecond,
		"the victim holds every key")
	survivor := startHelper(t, "survivor", "consume", store, env("survivor", "0"))
	require.Eventually(t, func() bool { return survivor.Count(func(l helperLine) bool { return l.Ready }) == 1 },
		30*time.Second, 10*time.Millisecond, "survivor ready")
	victim.Kill(t)

	waitSettled(t, cs, topic, group, partitions, n)
	survivor.Stop(t)

	delivered := make(map[uint64]bool)
	for _, p := range []*proc{victim, survivor} {
		last := make(map[string]uint64)
		for _, l := range p.Lines() {
			if !isDelivery(l) {
				continue
			}
			delivered[l.Seq] = true
			assert.GreaterOrEqual(t, l.Seq, last[l.Key], "%s: key %s went back from seq %d to %d", p.Name, l.Key, last[l.Key], l.Seq)
			last[l.Key] = l.Seq
		}
	}
	assert.Len(t, delivered, n, "every record delivered")
	retried := survivor.Count(func(l helperLine) bool { return isDelivery(l) && l.Seq%5 == 0 && l.Attempt > 1 })
	assert.Positive(t, retried, "the survivor delivered the records the victim had failed, as retries")
}
