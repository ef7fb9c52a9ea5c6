package event_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// keyedBus returns a Bus and its memory store on a fake clock: leases,
// backoffs and commits move only when the test moves the clock.
func keyedBus(t *testing.T, st *event.MemoryStore, clk *clock.Fake) *event.Bus {
	t.Helper()
	b, err := event.NewBus(st, event.Config{Clock: clk, CommitInterval: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close(context.Background())) })
	return b
}

func fakeClock() *clock.Fake { return clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// keyLog keeps what a key-ordered handler saw, per key, and checks on
// every call that no other record of the key is being handled.
type keyLog struct {
	mu      sync.Mutex
	busy    map[string]bool
	seqs    map[string][]uint64 // delivered, in delivery order
	n       int
	overlap []string
}

func newKeyLog() *keyLog {
	return &keyLog{busy: make(map[string]bool), seqs: make(map[string][]uint64)}
}

// enter notes d's delivery; the caller calls leave before it settles d.
func (l *keyLog) enter(d *event.Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d.Key != "" {
		if l.busy[d.Key] {
			l.overlap = append(l.overlap, fmt.Sprintf("key %s seq %d", d.Key, d.Seq))
		}
		l.busy[d.Key] = true
	}
	l.seqs[d.Key] = append(l.seqs[d.Key], d.Seq)
	l.n++
}

func (l *keyLog) leave(d *event.Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.busy, d.Key)
}

func (l *keyLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *keyLog) of(key string) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seqs[key])
}

// The test: 1,000 keys x 50 records, one key's record failing 5
// times. While that record backs off (the clock stands still), every
// other key goes through to its end, in order; then the failing key gets
// its retries and its remaining records, still in order.
func TestKeyOrderedNoHeadOfLineBlocking(t *testing.T) {
	t.Parallel()
	const keys, per, failing, failAt, fails = 1000, 50, "k-7", 10, 5
	clk := fakeClock()
	st := event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})
	b := keyedBus(t, st, clk)
	ctx := context.Background()

	recs := make([]event.Record, 0, keys*per)
	for i := range per {
		for k := range keys {
			r, err := b.NewRecord("t", []byte(strconv.Itoa(i)), event.PublishOptions{Key: "k-" + strconv.Itoa(k)})
			require.NoError(t, err)
			recs = append(recs, r)
		}
	}
	_, err := b.Append(ctx, "t", recs)
	require.NoError(t, err)
	want := make(map[string][]uint64, keys)
	head, err := st.Head(ctx, "t")
	require.NoError(t, err)
	all, err := st.Read(ctx, "t", 0, int(head))
	require.NoError(t, err)
	for _, r := range all {
		want[r.Key] = append(want[r.Key], r.Seq)
	}
	failSeq := want[failing][failAt-1]

	log := newKeyLog()
	var mu sync.Mutex
	failed := 0
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		log.enter(d)
		defer log.leave(d)
		if d.Seq == failSeq {
			mu.Lock()
			defer mu.Unlock()
			if failed < fails {
				failed++
				return errors.New("not yet")
			}
		}
		return nil
	}, event.FromEarliest(), event.WithKeyOrdered(), event.WithConcurrency(8),
		event.WithMaxAttempts(fails+1), event.WithBackoff(time.Second, time.Second))
	require.NoError(t, err)

	// The clock stands still: the failing record cannot come back, and
	// everything else goes through.
	require.Eventually(t, func() bool { return log.count() == keys*per-(per-failAt) }, 30*time.Second, time.Millisecond,
		"the other keys must not wait for the failing one")
	for k := range keys {
		key := "k-" + strconv.Itoa(k)
		if key != failing {
			require.Equal(t, want[key], log.of(key), "key %s out of order", key)
		}
	}
	assert.Equal(t, want[failing][:failAt], log.of(failing), "the failing key stops at its failing record")
	st0 := b.Stats()[0]
	assert.Equal(t, per-failAt, st0.Held, "the failing key's later records are held behind it")

	// Now its retries run out, and the rest of the key follows.
	require.Eventually(t, func() bool {
		clk.Advance(100 * time.Millisecond)
		c, err := b.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == head
	}, 30*time.Second, time.Millisecond)
	wantFailing := slices.Clone(want[failing][:failAt])
	for range fails {
		wantFailing = append(wantFailing, failSeq)
	}
	wantFailing = append(wantFailing, want[failing][failAt:]...)
	assert.Equal(t, wantFailing, log.of(failing), "the failing key keeps its order through its retries")
	assert.Empty(t, log.overlap, "two records of one key were handled at once")
}

// A blocked key holds at most MaxPerKey records; its later ones wait in
// the read buffer while the other keys flow.
func TestKeyOrderedMaxPerKey(t *testing.T) {
	t.Parallel()
	const hot, others, limit = 30, 40, 5
	clk := fakeClock()
	st := event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})
	b := keyedBus(t, st, clk)
	ctx := context.Background()

	log := newKeyLog()
	var mu sync.Mutex
	maxHeld, nacked := 0, false
	_, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		log.enter(d)
		defer log.leave(d)
		mu.Lock()
		defer mu.Unlock()
		maxHeld = max(maxHeld, b.Stats()[0].Held)
		if d.Key == "hot" && !nacked {
			nacked = true
			return errors.New("back off")
		}
		return nil
	}, event.FromEarliest(), event.WithKeyOrdered(), event.WithMaxInFlight(20), event.WithMaxPerKey(limit),
		event.WithBackoff(time.Hour, time.Hour))
	require.NoError(t, err)

	for i := range hot + others {
		key := "k" + strconv.Itoa(i)
		if i%2 == 0 && i < 2*hot {
			key = "hot"
		}
		_, err := b.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithKey(key))
		require.NoError(t, err)
	}
	// A stable state: every other key done, the hot key backing off with
	// limit-1 records behind it, the rest of it unread or buffered.
	require.Eventually(t, func() bool {
		s := b.Stats()[0]
		return log.count() == others+1 && s.InFlight == 0 && s.Held == limit-1
	}, 10*time.Second, time.Millisecond)
	s := b.Stats()[0]
	assert.Equal(t, limit, s.Waiting, "the backing-off record and those held behind it")
	assert.Equal(t, hot-limit, s.Buffered, "the hot key's later records wait in the read buffer")

	clk.Advance(time.Hour)
	require.Eventually(t, func() bool {
		clk.Advance(time.Millisecond)
		c, err := b.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == hot+others
	}, 10*time.Second, time.Millisecond)
	hotSeqs := log.of("hot")
	require.Len(t, hotSeqs, hot+1)
	assert.Equal(t, hotSeqs[0], hotSeqs[1], "the nacked record comes again first")
	assert.True(t, slices.IsSorted(hotSeqs), "hot key out of order: %v", hotSeqs)
	mu.Lock()
	defer mu.Unlock()
	assert.LessOrEqual(t, maxHeld, limit-1, "a key held more than MaxPerKey records")
	assert.Empty(t, log.overlap)
}

// With manual acks, each key has one record in flight and records without
// a key are all in flight at once; a nack holds only its own key.
func TestKeyOrderedManualAck(t *testing.T) {
	t.Parallel()
	clk := fakeClock()
	st := event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})
	b := keyedBus(t, st, clk)
	ctx := context.Background()

	var mu sync.Mutex
	var got []*event.Delivery
	_, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
		return nil
	}, event.FromEarliest(), event.WithKeyOrdered(), event.WithManualAck(), event.WithMaxInFlight(100),
		event.WithBackoff(time.Minute, time.Minute))
	require.NoError(t, err)
	snapshot := func() []*event.Delivery {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	for i := range 3 {
		for _, k := range []string{"a", "b", "c", "", ""} {
			_, err := b.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithKey(k))
			require.NoError(t, err)
		}
	}
	// Stable: 3 keyed heads and 6 unkeyed in flight, 6 held, nothing buffered.
	require.Eventually(t, func() bool {
		s := b.Stats()[0]
		return s.InFlight == 9 && s.Held == 6 && s.Buffered == 0 && len(snapshot()) == 9
	}, 10*time.Second, time.Millisecond)
	byKey := map[string][]uint64{}
	for _, d := range snapshot() {
		byKey[d.Key] = append(byKey[d.Key], d.Seq)
	}
	assert.Equal(t, map[string][]uint64{"a": {1}, "b": {2}, "c": {3}, "": {4, 5, 9, 10, 14, 15}}, byKey)

	// Nack a, ack b and c: b and c move on, a waits for its backoff.
	settled := map[*event.Delivery]bool{}
	for _, d := range snapshot() {
		switch d.Seq {
		case 1:
			require.NoError(t, d.Nack(ctx, "later"))
		case 2, 3:
			require.NoError(t, d.Ack(ctx))
		default:
			continue
		}
		settled[d] = true
	}
	require.Eventually(t, func() bool { return len(snapshot()) == 11 }, 10*time.Second, time.Millisecond)
	next := snapshot()[9:]
	assert.ElementsMatch(t, []uint64{7, 8}, []uint64{next[0].Seq, next[1].Seq}, "b and c deliver their second records")
	assert.Equal(t, 5, b.Stats()[0].Waiting, "a's first record backs off with a's other two behind it, plus one each of b and c")

	// Settle everything else as it comes; a follows after its backoff.
	require.Eventually(t, func() bool {
		for _, d := range snapshot() {
			if !settled[d] {
				settled[d] = true
				assert.NoError(t, d.Ack(ctx))
			}
		}
		clk.Advance(time.Second)
		c, err := b.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == 15
	}, 10*time.Second, time.Millisecond)
	var aSeqs []uint64
	for _, d := range snapshot() {
		if d.Key == "a" {
			aSeqs = append(aSeqs, d.Seq)
		}
	}
	assert.Equal(t, []uint64{1, 1, 6, 11}, aSeqs)
}

// Records held behind a blocked key are not settled: the cursor stays
// below the key's first unsettled record, and after a restart the key's
// records all come again, in order.
func TestKeyOrderedHeldSurviveRestart(t *testing.T) {
	t.Parallel()
	clk := fakeClock()
	st := event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})
	ctx := context.Background()
	b1 := keyedBus(t, st, clk)
	log1 := newKeyLog()
	_, err := b1.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		log1.enter(d)
		defer log1.leave(d)
		if d.Key == "stuck" {
			return errors.New("not now")
		}
		return nil
	}, event.FromEarliest(), event.WithKeyOrdered(), event.WithBackoff(time.Hour, time.Hour))
	require.NoError(t, err)
	for i := range 20 {
		key := "k" + strconv.Itoa(i%4)
		if i%5 == 2 {
			key = "stuck" // seqs 3, 8, 13, 18
		}
		_, err := b1.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithKey(key))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		clk.Advance(time.Millisecond) // commits
		c, err := b1.Cursor(ctx, "t", "g")
		return log1.count() == 17 && err == nil && c.Seq == 2
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, 3, b1.Stats()[0].Held)
	require.NoError(t, b1.Close(ctx))

	c, err := st.Cursors(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), c[0], "the cursor never passes a held record")

	b2 := keyedBus(t, st, clk)
	log2 := newKeyLog()
	_, err = b2.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		log2.enter(d)
		defer log2.leave(d)
		return nil
	}, event.FromEarliest(), event.WithKeyOrdered())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		clk.Advance(time.Millisecond)
		c, err := b2.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == 20
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, []uint64{3, 8, 13, 18}, log2.of("stuck"), "the held records come again, in order")
	assert.Empty(t, log1.overlap)
	assert.Empty(t, log2.overlap)
}

// Key order is a group setting: a subscription that asks for nothing joins
// a key-ordered group as it is, one that asks for other settings is
// refused by name.
func TestKeyOrderedIsTheGroups(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	_, err := b.Subscribe(ctx, "t", "g", nopHandler, event.WithKeyOrdered())
	require.NoError(t, err)
	_, err = b.Subscribe(ctx, "t", "g", nopHandler)
	require.NoError(t, err, "asking for nothing joins the group as stored")
	_, err = b.Subscribe(ctx, "t", "g", nopHandler, event.WithKeyOrdered(), event.WithMaxPerKey(3))
	var ce *event.GroupConfigError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, event.ErrInvalid)
	assert.Equal(t, []event.Conflict{{Field: "maxPerKey", Stored: "0", Asked: "3"}}, ce.Conflicts)
	_, err = b.Subscribe(ctx, "t2", "g", nopHandler)
	require.NoError(t, err)
	_, err = b.Subscribe(ctx, "t2", "g", nopHandler, event.WithKeyOrdered())
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []event.Conflict{{Field: "keyOrdered", Stored: "false", Asked: "true"}}, ce.Conflicts)
	cfg, err := b.GroupConfig(ctx, "t", "g")
	require.NoError(t, err)
	assert.True(t, cfg.KeyOrdered)
}

func TestKeyOrderedMaxPerKeyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    event.GroupConfig
		err  string
	}{
		{"default", event.GroupConfig{KeyOrdered: true}, ""},
		{"given", event.GroupConfig{KeyOrdered: true, MaxPerKey: 50}, ""},
		{"negative", event.GroupConfig{KeyOrdered: true, MaxPerKey: -1}, "maxPerKey: -1 is negative"},
		{"not key-ordered", event.GroupConfig{MaxPerKey: 5}, "maxPerKey: 5 without keyOrdered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, event.ErrInvalid)
			assert.ErrorContains(t, err, tc.err)
		})
	}
}

// A record the filter refuses is settled in its turn, and its key goes on
// past it.
func TestKeyOrderedFilter(t *testing.T) {
	t.Parallel()
	clk := fakeClock()
	b := keyedBus(t, event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}), clk)
	ctx := context.Background()
	var mu sync.Mutex
	var got []*event.Delivery
	_, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
		return nil
	}, event.FromEarliest(), event.WithKeyOrdered(), event.WithManualAck(),
		event.WithFilter(func(r *event.Record) bool { return string(r.Payload) != `"skip"` }))
	require.NoError(t, err)
	snapshot := func() []*event.Delivery {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	for _, p := range []string{"a", "skip", "b"} {
		_, err := b.Publish(ctx, "t", []byte(`"`+p+`"`), event.WithKey("k"))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		s := b.Stats()[0]
		return s.InFlight == 1 && s.Held == 2 && len(snapshot()) == 1
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, snapshot()[0].Ack(ctx))
	require.Eventually(t, func() bool { return len(snapshot()) == 2 }, 10*time.Second, time.Millisecond)
	d := snapshot()[1]
	assert.Equal(t, uint64(3), d.Seq, "the refused record is passed over, in order")
	require.NoError(t, d.Ack(ctx))
	require.Eventually(t, func() bool {
		clk.Advance(time.Millisecond)
		c, err := b.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == 3
	}, 10*time.Second, time.Millisecond)
	assert.Zero(t, b.Stats()[0].Held)
}

// A subscription that leaves gives its key's head back; the subscription
// that takes the partition over gets the key from there, in order.
func TestKeyOrderedHandOverKeepsOrder(t *testing.T) {
	t.Parallel()
	clk := fakeClock()
	b := keyedBus(t, event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}), clk)
	ctx := context.Background()
	first := make(chan *event.Delivery, 10)
	sub1, err := b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		first <- d
		return nil
	}, event.FromEarliest(), event.WithKeyOrdered(), event.WithManualAck())
	require.NoError(t, err)
	for i := range 3 {
		_, err := b.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithKey("k"))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return b.Stats()[0].Held == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, uint64(1), (<-first).Seq)

	log := newKeyLog()
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, d *event.Delivery) error {
		log.enter(d)
		defer log.leave(d)
		return nil
	}, event.WithKeyOrdered())
	require.NoError(t, err)
	require.NoError(t, sub1.Close())
	require.Eventually(t, func() bool {
		clk.Advance(time.Millisecond)
		c, err := b.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == 3
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, []uint64{1, 2, 3}, log.of("k"))
	assert.Empty(t, first, "the leaving subscription got no more of the key")
}
