package compaction_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/compaction"
	"github.com/promethean/promlib/event"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newBus(t *testing.T) (*event.Bus, *event.MemoryStore) {
	t.Helper()
	s := event.NewMemoryStore()
	b, err := event.NewBus(s, event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	return b, s
}

type update struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

func publishUpdates(t *testing.T, b *event.Bus, topic string, from, to, keys int, ts int64) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < to; i++ {
		k := "k" + strconv.Itoa(i%keys)
		opts := []event.PublishOption{event.WithKey(k)}
		if ts != 0 {
			opts = append(opts, event.WithTS(ts))
		}
		_, err := event.PublishJSON(ctx, b, topic, update{k, i}, opts...)
		require.NoError(t, err)
	}
}

func readAll(t *testing.T, s event.Store, topic string) []event.Record {
	t.Helper()
	var out []event.Record
	after := uint64(0)
	for {
		page, err := s.Read(context.Background(), topic, after, 1000)
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

// 100,000 updates over 1,000 keys: Latest holds exactly the last value
// per key; pruning keeps the latest per key and what is younger than the
// age, nothing else.
func TestCompactionKeepsTheLatestPerKey(t *testing.T) {
	t.Parallel()
	b, s := newBus(t)
	ctx := context.Background()
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	publishUpdates(t, b, "state", 0, 50_000, 1000, old)
	publishUpdates(t, b, "state", 50_000, 100_000, 1000, 0)

	want := make(map[string]int)
	for i := range 100_000 {
		want["k"+strconv.Itoa(i%1000)] = i
	}
	got := latestMap(t, s, "state")
	assert.Equal(t, want, got, "Latest is the last value of each key")

	c, err := compaction.NewCompactor(compaction.Config{Bus: b, Policies: []compaction.TopicPolicy{
		{Topic: "state", Compacted: true, MinAge: time.Hour},
	}})
	require.NoError(t, err)
	rep, err := c.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 50_000, rep.Pruned)
	left := readAll(t, s, "state")
	require.Len(t, left, 50_000, "the young half stays, the old half was superseded")
	for _, r := range left {
		assert.Greater(t, r.TS, old)
	}
	assert.Equal(t, want, latestMap(t, s, "state"), "pruning never loses a key's state")
	head, err := s.Head(ctx, "state")
	require.NoError(t, err)
	assert.Equal(t, uint64(100_000), head)
}

func latestMap(t *testing.T, s *event.MemoryStore, topic string) map[string]int {
	t.Helper()
	out := make(map[string]int)
	after := ""
	for {
		page, err := s.Latest(context.Background(), topic, after, 333)
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		for _, r := range page {
			u, err := event.Decode[update](&r)
			require.NoError(t, err)
			out[r.Key] = u.N
			after = r.Key
		}
	}
}

func TestRetentionPrunesRawTopics(t *testing.T) {
	t.Parallel()
	b, s := newBus(t)
	ctx := context.Background()
	publishUpdates(t, b, "raw", 0, 100, 10, time.Now().Add(-3*time.Hour).UnixMilli())
	publishUpdates(t, b, "raw", 100, 150, 10, 0)
	c, err := compaction.NewCompactor(compaction.Config{Bus: b, Policies: []compaction.TopicPolicy{{Topic: "raw", Retention: time.Hour}}})
	require.NoError(t, err)
	rep, err := c.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 100, rep.Pruned)
	floor, err := s.Floor(ctx, "raw")
	require.NoError(t, err)
	assert.Equal(t, uint64(101), floor)
	assert.Len(t, readAll(t, s, "raw"), 50)
}

// Snapshots carry the keys that changed since the previous run, and
// nothing when nothing changed.
func TestSnapshotsOfChangedKeys(t *testing.T) {
	t.Parallel()
	b, s := newBus(t)
	ctx := context.Background()
	c, err := compaction.NewCompactor(compaction.Config{Bus: b, Interval: time.Hour, Policies: []compaction.TopicPolicy{
		{Topic: "state", Compacted: true, SnapshotTopic: "state.snapshot"},
	}})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	publishUpdates(t, b, "state", 0, 10_000, 1000, 0)
	waitTracked(t, c, 10_000)
	rep, err := c.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1000, rep.Snapshots)
	snaps := readAll(t, s, "state.snapshot")
	require.Len(t, snaps, 1000)
	for _, r := range snaps {
		u, err := event.Decode[update](&r)
		require.NoError(t, err)
		assert.Equal(t, r.Key, u.Key)
		assert.GreaterOrEqual(t, u.N, 9000, "the latest value of the key")
		assert.Equal(t, "state", r.Headers[compaction.HeaderSnapshotOf])
	}

	rep, err = c.RunOnce(ctx)
	require.NoError(t, err)
	assert.Zero(t, rep.Snapshots, "no change, no snapshot")

	publishUpdates(t, b, "state", 10_000, 10_005, 3, 0) // keys k0..k2
	waitTracked(t, c, 5)
	rep, err = c.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Snapshots, "only the changed keys")
	assert.Len(t, readAll(t, s, "state.snapshot"), 1003)
}

// waitTracked waits until the compactor holds n changes.
func waitTracked(t *testing.T, c *compaction.Compactor, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return c.Pending() == n }, 20*time.Second, 5*time.Millisecond)
}

// A consumer started cold while publishing goes on ends with the state
// computed from the full log, applying no record twice.
func TestWarmWhilePublishing(t *testing.T) {
	t.Parallel()
	b, s := newBus(t)
	ctx := context.Background()
	publishUpdates(t, b, "state", 0, 5000, 50, 0)

	stop := make(chan struct{})
	var published atomic.Int64
	published.Store(5000)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 5000; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := "k" + strconv.Itoa(i%60) // new keys appear too
			if _, err := event.PublishJSON(ctx, b, "state", update{k, i}, event.WithKey(k)); err != nil {
				return
			}
			published.Add(1)
		}
	}()

	var mu sync.Mutex
	state := make(map[string]int)
	seen := make(map[uint64]int)
	sub, err := compaction.Warm(ctx, b, "state", "warm-consumer", func(ctx context.Context, r *event.Record) error {
		u, err := event.Decode[update](r)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		seen[r.Seq]++
		state[r.Key] = u.N
		return nil
	})
	require.NoError(t, err)
	defer sub.Close()
	require.Eventually(t, func() bool { return published.Load() > 8000 }, 20*time.Second, time.Millisecond)
	close(stop)
	wg.Wait()
	head, err := s.Head(ctx, "state")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := b.Cursor(ctx, "state", "warm-consumer")
		return err == nil && c.Seq == head
	}, 20*time.Second, 5*time.Millisecond)

	want := make(map[string]int)
	for _, r := range readAll(t, s, "state") {
		var u update
		require.NoError(t, json.Unmarshal(r.Payload, &u))
		want[r.Key] = u.N
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, state, "the state equals the full log's")
	for seq, n := range seen {
		require.Equal(t, 1, n, "seq %d applied %d times", seq, n)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	b, _ := newBus(t)
	_, err := compaction.NewCompactor(compaction.Config{Bus: b, Interval: -1, Policies: []compaction.TopicPolicy{
		{Topic: "bad topic"},
		{Topic: "a", Compacted: true, Retention: time.Hour},
		{Topic: "b", SnapshotTopic: "b.snap"},
	}})
	require.ErrorIs(t, err, compaction.ErrInvalid)
	for _, f := range []string{"Interval", "Policies[0]", "Policies[1]", "Policies[2]"} {
		assert.ErrorContains(t, err, f)
	}
	_, err = compaction.Warm(context.Background(), b, "t", "g", nil)
	assert.ErrorIs(t, err, compaction.ErrInvalid)
}
