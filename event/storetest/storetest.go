package storetest

import (
	"context"
	"encoding/json"
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

// Factory returns a new, empty store. It may register cleanups on t.
type Factory func(t *testing.T) event.Store

// wait is how long a test waits for a condition: generous, since stores
// backed by a server poll, and a loaded machine slows them down.
const wait = 30 * time.Second

const tick = 5 * time.Millisecond

// Options tune the suite to a store; pass at most one.
type Options struct {
	// Fewer runs the bus tests that publish hundreds of records to check
	// a property that does not depend on their number (order by seq, each
	// record delivered once among members that share a group or to each
	// of two groups, per key order, a rebalance losing nothing, hooks
	// without overlap) with a fifth of them: for a store whose
	// every call is a round trip to a slow server, such as the bundled
	// MongoDB test server, which runs a database's commands one at a time,
	// or whose records cost much CPU, such as SQLite under the race
	// detector.
	Fewer bool
	// Clocked makes a new, empty store whose leases and memberships run
	// on clk. The tests of fencing and the simulation of the group
	// protocol need it: they stall members by moving a fake clock. A store
	// that implements LeaseStore must give it; those tests fail without.
	Clocked func(t *testing.T, clk clock.Clock) event.Store
	// Schedules is how many schedules the simulation of the group
	// protocol runs (default 100, 10 with Fewer); the -schedules flag of
	// the test binary overrides it.
	Schedules int
}

// n returns how many records a test that publishes full of them
// publishes under o.
func (o Options) n(full int) int {
	if o.Fewer {
		return full / 5
	}
	return full
}

func options(opts []Options) Options {
	if len(opts) > 0 {
		return opts[0]
	}
	return Options{}
}

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore Factory, opts ...Options) {
	t.Run("Store", func(t *testing.T) { RunStore(t, newStore, opts...) })
	t.Run("Bus", func(t *testing.T) { RunBus(t, newStore, opts...) })
}

// RunStore checks the Store, CursorStore and LeaseStore contracts directly.
func RunStore(t *testing.T, newStore Factory, opts ...Options) {
	o := options(opts)
	tests := []struct {
		name string
		fn   func(t *testing.T, s event.Store)
	}{
		{"AppendAssignsSeqInOrder", testAppendAssignsSeq},
		{"AppendIsIdempotentByID", testAppendIdempotent},
		{"ReadPagesBySeq", testReadPages},
		{"FindByID", testFindByID},
		{"FirstSeqAtOrAfter", testFirstSeqAtOrAfter},
		{"TopicsAreSeparate", testTopicsSeparate},
		{"Cursors", testCursors},
		{"Leases", testLeases},
		{"TopicConfig", testTopicConfig},
		{"GroupConfig", testGroupConfig},
		{"TakeLease", func(t *testing.T, s event.Store) { testTakeLease(t, s, o) }},
		{"Renew", func(t *testing.T, s event.Store) { testRenew(t, s, o) }},
		{"ExpireGroup", func(t *testing.T, s event.Store) { testExpireGroup(t, s, o) }},
		{"FencedWrites", func(t *testing.T, s event.Store) { testFencedWrites(t, s, o) }},
		{"LatestByKey", testLatestByKey},
		{"PruneCompacted", testPruneCompacted},
		{"PruneRetention", testPruneRetention},
		{"GroupState", testGroupStateStore},
		{"BinaryPayloads", testBinaryPayloads},
		{"ListTopics", testListTopics},
		{"ListGroups", testListGroups},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

func rec(topic, id string, ts int64, payload string) event.Record {
	return event.Record{ID: id, TS: ts, Topic: topic, Payload: json.RawMessage(payload)}
}

func testAppendAssignsSeq(t *testing.T, s event.Store) {
	ctx := context.Background()
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Zero(t, head)
	out, err := s.Append(ctx, "t", []event.Record{rec("t", "a", 1, `1`), rec("t", "b", 1, `2`)})
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.Equal(t, uint64(1), out[0].Seq)
	assert.Equal(t, uint64(2), out[1].Seq)
	out, err = s.Append(ctx, "t", []event.Record{rec("t", "c", 1, `{"x":[1,2]}`)})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), out[0].Seq)
	head, err = s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), head)

	full := event.Record{
		ID: "d", TS: 42, Topic: "t", Key: "k", Partition: 3,
		Headers: map[string]string{"h": "v"}, Payload: json.RawMessage(`{"a":"b"}`),
		CausedBy: []string{"a", "b"}, Tags: []string{"#x"}, SID: "s1",
	}
	_, err = s.Append(ctx, "t", []event.Record{full})
	require.NoError(t, err)
	got, err := s.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 4)
	for i, r := range got {
		assert.Equal(t, uint64(i+1), r.Seq)
		assert.Equal(t, "t", r.Topic)
	}
	assert.JSONEq(t, `{"x":[1,2]}`, string(got[2].Payload))
	full.Seq = 4
	assert.JSONEq(t, string(full.Payload), string(got[3].Payload))

	// The store keeps copies: a caller reusing its buffers changes nothing.
	buf := []byte(`{"v":"before"}`)
	hdr := map[string]string{"h": "before"}
	_, err = s.Append(ctx, "t", []event.Record{{ID: "e", TS: 1, Topic: "t", Payload: buf, Headers: hdr}})
	require.NoError(t, err)
	copy(buf, `{"v":"after!"}`)
	hdr["h"] = "after"
	got5, err := s.Read(ctx, "t", 4, 1)
	require.NoError(t, err)
	require.Len(t, got5, 1)
	assert.JSONEq(t, `{"v":"before"}`, string(got5[0].Payload))
	assert.Equal(t, "before", got5[0].Headers["h"])
	got[3].Payload = full.Payload
	assert.Equal(t, full, got[3])
}

func testAppendIdempotent(t *testing.T, s event.Store) {
	ctx := context.Background()
	first, err := s.Append(ctx, "t", []event.Record{rec("t", "a", 1, `"first"`)})
	require.NoError(t, err)
	again, err := s.Append(ctx, "t", []event.Record{rec("t", "b", 2, `"b"`), rec("t", "a", 3, `"second"`), rec("t", "b", 4, `"b2"`)})
	require.NoError(t, err)
	require.Len(t, again, 3)
	assert.Equal(t, first[0].Seq, again[1].Seq, "a repeated id returns the stored record")
	assert.JSONEq(t, `"first"`, string(again[1].Payload))
	assert.Equal(t, again[0].Seq, again[2].Seq, "a repeated id within one batch is stored once")
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), head)
	// Distinct ids of which the last is stored: the new ones take the next
	// seqs, without a gap, also when they are many (several statements in
	// a SQL store, where the stored id fails the last).
	var mixed []event.Record
	for i := range 60 {
		mixed = append(mixed, rec("t", "m"+strconv.Itoa(i), 5, strconv.Itoa(i)))
	}
	mixed = append(mixed, rec("t", "a", 6, `"third"`))
	out, err := s.Append(ctx, "t", mixed)
	require.NoError(t, err)
	require.Len(t, out, 61)
	for i := range 60 {
		assert.Equal(t, uint64(3+i), out[i].Seq, "new id %d", i)
	}
	assert.Equal(t, first[0].Seq, out[60].Seq, "the stored id returns its record")
	assert.JSONEq(t, `"first"`, string(out[60].Payload))
	all, err := s.Read(ctx, "t", 0, 100)
	require.NoError(t, err)
	require.Len(t, all, 62, "a, b and the 60 new records, each once")
	for i, r := range all {
		assert.Equal(t, uint64(i+1), r.Seq)
	}
	head, err = s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(62), head)
	// The same id in another topic is another record.
	other, err := s.Append(ctx, "u", []event.Record{rec("u", "a", 1, `1`)})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), other[0].Seq)
}

func testReadPages(t *testing.T, s event.Store) {
	ctx := context.Background()
	var batch []event.Record
	for i := range 25 {
		batch = append(batch, rec("t", "id"+strconv.Itoa(i), 7, strconv.Itoa(i)))
	}
	_, err := s.Append(ctx, "t", batch)
	require.NoError(t, err)
	var seen []uint64
	after := uint64(0)
	for {
		page, err := s.Read(ctx, "t", after, 10)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		assert.LessOrEqual(t, len(page), 10)
		for _, r := range page {
			seen = append(seen, r.Seq)
			after = r.Seq
		}
	}
	require.Len(t, seen, 25)
	for i, s := range seen {
		assert.Equal(t, uint64(i+1), s)
	}
	page, err := s.Read(ctx, "missing", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, page)
}

func testFindByID(t *testing.T, s event.Store) {
	ctx := context.Background()
	_, err := s.Append(ctx, "t", []event.Record{rec("t", "a", 1, `1`), rec("t", "b", 2, `2`)})
	require.NoError(t, err)
	r, err := s.FindByID(ctx, "t", "b")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), r.Seq)
	_, err = s.FindByID(ctx, "t", "zzz")
	assert.ErrorIs(t, err, event.ErrNotFound)
	_, err = s.FindByID(ctx, "u", "a")
	assert.ErrorIs(t, err, event.ErrNotFound)
}

func testFirstSeqAtOrAfter(t *testing.T, s event.Store) {
	ctx := context.Background()
	_, err := s.Append(ctx, "t", []event.Record{
		rec("t", "a", 100, `1`), rec("t", "b", 200, `2`), rec("t", "c", 200, `3`), rec("t", "d", 300, `4`),
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		ts   int64
		seq  uint64
		some bool
	}{{0, 1, true}, {100, 1, true}, {150, 2, true}, {200, 2, true}, {300, 4, true}, {301, 0, false}} {
		seq, ok, err := s.FirstSeqAtOrAfter(ctx, "t", tc.ts)
		require.NoError(t, err)
		assert.Equal(t, tc.some, ok, "ts %d", tc.ts)
		assert.Equal(t, tc.seq, seq, "ts %d", tc.ts)
	}
}

func testTopicsSeparate(t *testing.T, s event.Store) {
	ctx := context.Background()
	_, err := s.Append(ctx, "a.b", []event.Record{rec("a.b", "1", 1, `1`)})
	require.NoError(t, err)
	_, err = s.Append(ctx, "a", []event.Record{rec("a", "2", 1, `2`), rec("a", "3", 1, `3`)})
	require.NoError(t, err)
	h1, err := s.Head(ctx, "a.b")
	require.NoError(t, err)
	h2, err := s.Head(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), h1)
	assert.Equal(t, uint64(2), h2)
	_, err = s.Append(ctx, "a", []event.Record{rec("other", "x", 1, `1`)})
	assert.ErrorIs(t, err, event.ErrInvalid, "a record of another topic is refused")
	h2, err = s.Head(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), h2, "a refused append stores nothing")
}

func testCursors(t *testing.T, s event.Store) {
	cs, ok := s.(event.CursorStore)
	if !ok {
		t.Skip("store does not implement CursorStore")
	}
	ctx := context.Background()
	got, err := cs.Cursors(ctx, "t", "g")
	require.NoError(t, err)
	assert.Empty(t, got)
	require.NoError(t, cs.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, 10, event.Fence{}))
	require.NoError(t, cs.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, 5, event.Fence{}))
	require.NoError(t, cs.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 1}, 0, event.Fence{}))
	require.NoError(t, cs.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "h", Partition: 0}, 99, event.Fence{}))
	got, err = cs.Cursors(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, map[int]uint64{0: 10, 1: 0}, got, "commits never move a cursor back")
	require.NoError(t, cs.SetCursor(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, 3))
	got, err = cs.Cursors(ctx, "t", "g")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), got[0], "SetCursor moves back")
}

func testLeases(t *testing.T, s event.Store) {
	ls, ok := s.(event.LeaseStore)
	if !ok {
		t.Skip("store does not implement LeaseStore")
	}
	ctx := context.Background()
	const ttl = 2 * time.Second
	m, err := ls.Heartbeat(ctx, "t", "g", "b", ttl)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, m)
	m, err = ls.Heartbeat(ctx, "t", "g", "a", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, m, "members sorted")

	// Long leases where the test checks exclusivity, so that a slow server
	// cannot let one expire between two calls.
	const long = time.Minute
	_, ok, err = ls.AcquireLease(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, "a", long)
	require.NoError(t, err)
	assert.True(t, ok)
	_, ok, err = ls.AcquireLease(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, "b", long)
	require.NoError(t, err)
	assert.False(t, ok, "a live lease is exclusive")
	_, ok, err = ls.AcquireLease(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, "a", long)
	require.NoError(t, err)
	assert.True(t, ok, "the holder renews")
	_, ok, err = ls.AcquireLease(ctx, event.PartitionRef{Topic: "t", Group: "g2", Partition: 0}, "b", ttl)
	require.NoError(t, err)
	assert.True(t, ok, "groups are separate")

	require.NoError(t, ls.ReleaseLease(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, "b"), "release by a non-holder is a no-op")
	_, ok, err = ls.AcquireLease(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, "b", ttl)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, ls.ReleaseLease(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, "a"))
	_, ok, err = ls.AcquireLease(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, "b", ttl)
	require.NoError(t, err)
	assert.True(t, ok, "a released lease is free")

	// b's lease and membership expire.
	require.Eventually(t, func() bool {
		_, ok, err := ls.AcquireLease(ctx, event.PartitionRef{Topic: "t", Group: "g", Partition: 0}, "a", ttl)
		return err == nil && ok
	}, wait, tick, "an expired lease is taken over")
	require.Eventually(t, func() bool {
		m, err := ls.Heartbeat(ctx, "t", "g", "a", time.Hour)
		return err == nil && slices.Equal(m, []string{"a"})
	}, wait, tick, "an expired member leaves the list")
	require.NoError(t, ls.Leave(ctx, "t", "g", "a"))
	m, err = ls.Heartbeat(ctx, "t", "g", "c", ttl)
	require.NoError(t, err)
	assert.Equal(t, []string{"c"}, m)
}

// pubN publishes n records with payloads {"i":0..n-1} and returns them.
func pubN(t *testing.T, b *event.Bus, topic string, n int, opts ...event.PublishOption) []event.Record {
	t.Helper()
	out := make([]event.Record, n)
	for i := range n {
		r, err := b.Publish(context.Background(), topic, []byte(fmt.Sprintf(`{"i":%d}`, i)), opts...)
		require.NoError(t, err)
		out[i] = r
	}
	return out
}

// collector records deliveries.
type collector struct {
	mu   sync.Mutex
	got  []*event.Delivery
	seqs map[uint64]int
}

func newCollector() *collector { return &collector{seqs: make(map[uint64]int)} }

func (c *collector) add(d *event.Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, d)
	c.seqs[d.Seq]++
}

func (c *collector) handler(ctx context.Context, d *event.Delivery) error {
	c.add(d)
	return nil
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs)
}

func (c *collector) snapshot() []*event.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func (c *collector) seqList() []uint64 {
	var out []uint64
	for _, d := range c.snapshot() {
		out = append(out, d.Seq)
	}
	return out
}

func keyed(topic, id, key string, ts int64) event.Record {
	r := rec(topic, id, ts, strconv.Quote(id))
	r.Key = key
	return r
}

func testLatestByKey(t *testing.T, s event.Store) {
	ks, ok := s.(event.KeyStore)
	if !ok {
		t.Skip("store does not implement KeyStore")
	}
	ctx := context.Background()
	_, err := s.Append(ctx, "t", []event.Record{
		keyed("t", "1", "a", 1), keyed("t", "2", "b", 1), keyed("t", "3", "a", 1),
		keyed("t", "4", "c", 1), keyed("t", "5", "b", 1), rec("t", "6", 1, `0`),
	})
	require.NoError(t, err)
	_, err = s.Append(ctx, "u", []event.Record{keyed("u", "1", "a", 1)})
	require.NoError(t, err)
	got, err := ks.LatestByKey(ctx, "t", []string{"a", "b", "c", "zz"})
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, "3", got["a"].ID)
	assert.Equal(t, "5", got["b"].ID)
	assert.Equal(t, "4", got["c"].ID)
	assert.Equal(t, uint64(5), got["b"].Seq)

	var pages [][]string
	after := ""
	for {
		page, err := ks.Latest(ctx, "t", after, 2)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		var keys []string
		for _, r := range page {
			keys = append(keys, r.Key)
			after = r.Key
		}
		pages = append(pages, keys)
	}
	assert.Equal(t, [][]string{{"a", "b"}, {"c"}}, pages)
	empty, err := ks.Latest(ctx, "missing", "", 10)
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func testPruneCompacted(t *testing.T, s event.Store) {
	pr, ok := s.(event.Pruner)
	if !ok {
		t.Skip("store does not implement Pruner")
	}
	ctx := context.Background()
	_, err := s.Append(ctx, "t", []event.Record{
		keyed("t", "k1-old", "k1", 100), keyed("t", "k2-old", "k2", 100), keyed("t", "k1-new", "k1", 200),
		keyed("t", "k2-new", "k2", 300), rec("t", "nokey", 100, `1`), keyed("t", "k3", "k3", 100),
	})
	require.NoError(t, err)
	n, err := pr.Prune(ctx, "t", 250, true)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the superseded records older than the cut")
	got, err := s.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	assert.Equal(t, []string{"k1-new", "k2-new", "nokey", "k3"}, ids)
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(6), head, "pruning keeps the head")
	floor, err := pr.Floor(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), floor, "compaction does not raise the floor")
	_, err = s.FindByID(ctx, "t", "k1-old")
	assert.ErrorIs(t, err, event.ErrNotFound)
	if ks, ok := s.(event.KeyStore); ok {
		latest, err := ks.LatestByKey(ctx, "t", []string{"k1", "k2", "k3"})
		require.NoError(t, err)
		assert.Equal(t, "k1-new", latest["k1"].ID)
		assert.Equal(t, "k2-new", latest["k2"].ID)
		assert.Equal(t, "k3", latest["k3"].ID)
	}
	// A deleted id is a new record when published again; seqs are not reused.
	out, err := s.Append(ctx, "t", []event.Record{keyed("t", "k1-old", "k1", 400)})
	require.NoError(t, err)
	assert.Equal(t, uint64(7), out[0].Seq)
}

func testPruneRetention(t *testing.T, s event.Store) {
	pr, ok := s.(event.Pruner)
	if !ok {
		t.Skip("store does not implement Pruner")
	}
	ctx := context.Background()
	floor, err := pr.Floor(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), floor)
	_, err = s.Append(ctx, "t", []event.Record{
		rec("t", "a", 100, `1`), rec("t", "b", 200, `2`), rec("t", "c", 300, `3`), rec("t", "d", 150, `4`), rec("t", "e", 400, `5`),
	})
	require.NoError(t, err)
	n, err := pr.Prune(ctx, "t", 250, false)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	floor, err = pr.Floor(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), floor, "the lowest seq left")
	got, err := s.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, uint64(3), got[0].Seq)
	assert.Equal(t, uint64(5), got[1].Seq)
}

// fakeTime is the clock of a Bus made by newFakeBus: time moves only when
// the test moves it, so a lease or a backoff ends exactly when the test
// says, however slow the machine.
type fakeTime struct {
	t   *testing.T
	clk *clock.Fake
}

// newFakeBus returns a Bus with test timings on a fake clock, closed at the
// end of the test. The store keeps its own clock: only one member takes
// part, so store-side lease expiry never matters.
func newFakeBus(t *testing.T, s event.Store, mod ...func(*event.Config)) (*event.Bus, fakeTime) {
	t.Helper()
	clk := clock.NewFake(time.Now())
	b := newBus(t, s, append([]func(*event.Config){func(c *event.Config) { c.Clock = clk }}, mod...)...)
	return b, fakeTime{t: t, clk: clk}
}

// eventually waits for cond, moving the clock by step before each check so
// that commits, polls and backoffs come due.
func (ft fakeTime) eventually(step time.Duration, cond func() bool, msgAndArgs ...any) {
	ft.t.Helper()
	require.Eventually(ft.t, func() bool {
		ft.clk.Advance(step)
		return cond()
	}, wait, tick, msgAndArgs...)
}

// waitCursor is waitCursor on the fake clock.
func (ft fakeTime) waitCursor(b *event.Bus, topic, group string, want uint64) {
	ft.t.Helper()
	ft.eventually(time.Millisecond, func() bool {
		c, err := b.Cursor(context.Background(), topic, group)
		return err == nil && c.Seq == want
	}, "cursor of %s/%s never reached %d", topic, group, want)
}
