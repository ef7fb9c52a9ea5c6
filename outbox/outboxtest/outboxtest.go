package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
)

const wait = 60 * time.Second

// Store is what the suite tests: an [outbox.Store] that can also read one
// row back.
type Store interface {
	outbox.Store
	Row(ctx context.Context, id string) (outbox.Row, error)
}

// Factory returns a new, empty store on clock c (nil: the system clock).
// It may register cleanups on t.
type Factory func(t *testing.T, c clock.Clock) Store

// Options tune the suite to a store.
type Options struct {
	// Server says the store is backed by a database server: the tests run
	// one at a time (the bundled test server runs one command at a time
	// anyway) and with a twentieth of the rows, since the test server
	// scans collections for every query.
	Server bool
	// Fewer runs the tests with a twentieth of the rows, in parallel: for
	// a store that is slow where it runs, e.g. SQLite in Go under the race
	// detector.
	Fewer bool
}

// Run runs the whole suite, with a drainer on an in-memory bus, against
// stores made by newStore.
func Run(t *testing.T, newStore Factory, opts Options) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore func(clock.Clock) Store, scale func(int) int)
	}{
		{"DrainsInOrder", testDrainsInOrder},
		{"AddRejectsBadInput", testAddRejectsBadInput},
		{"RowsReadBack", testRowsReadBack},
		{"CrashBetweenPublishAndMarkSent", testCrashBetweenPublishAndMarkSent},
		{"TwoDrainersPublishEachRowOnce", testTwoDrainersPublishEachRowOnce},
		{"PausedDrainerIsFenced", testPausedDrainerIsFenced},
		{"PoisonRowFailsAndTheRestDrains", testPoisonRowFailsAndTheRestDrains},
		{"RetentionDeletesOldSentRows", testRetentionDeletesOldSentRows},
	}
	scale := func(n int) int { return n }
	if opts.Server || opts.Fewer {
		scale = func(n int) int { return n / 20 }
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !opts.Server {
				t.Parallel()
			}
			tc.fn(t, func(c clock.Clock) Store { return newStore(t, c) }, scale)
		})
	}
}

// countingStore counts how often each record id reaches the event store,
// and can fail appends of chosen payloads.
type countingStore struct {
	*event.MemoryStore
	mu     sync.Mutex
	counts map[string]int
	times  map[string][]time.Time
	poison string
}

func newCountingStore() *countingStore {
	return &countingStore{MemoryStore: event.NewMemoryStore(), counts: map[string]int{}, times: map[string][]time.Time{}}
}

func (s *countingStore) Append(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
	s.mu.Lock()
	for _, r := range recs {
		s.counts[r.ID]++
		if len(recs) == 1 { // the drainer's attempt of one row on its own
			s.times[r.ID] = append(s.times[r.ID], time.Now())
		}
	}
	s.mu.Unlock()
	for _, r := range recs {
		if s.poison != "" && strings.Contains(string(r.Payload), s.poison) {
			return nil, errors.New("store refuses poison")
		}
	}
	return s.MemoryStore.Append(ctx, topic, recs)
}

func (s *countingStore) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[id]
}

func newBus(t *testing.T, s event.Store) *event.Bus {
	t.Helper()
	b, err := event.NewBus(s, event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	return b
}

// runDrainer runs a drainer until the test ends (or stop is called).
func runDrainer(t *testing.T, cfg outbox.Config) (stop func()) {
	t.Helper()
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = time.Second
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	d, err := outbox.NewDrainer(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, d.Run(ctx))
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func msgs(topic string, n int, key func(i int) string) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{Topic: topic, Payload: []byte(strconv.Itoa(i))}
		if key != nil {
			out[i].Key = key(i)
		}
	}
	return out
}

func waitStats(t *testing.T, s outbox.Store, want outbox.Stats) {
	t.Helper()
	var last outbox.Stats
	var lastErr error
	ok := assert.Eventually(t, func() bool {
		last, lastErr = s.Stats(context.Background())
		return lastErr == nil && last == want
	}, wait, 250*time.Millisecond, "stats never reached %+v", want)
	if !ok {
		t.Fatalf("last stats: %+v, err %v", last, lastErr)
	}
}

// payloadOrder reads a topic and returns its payloads in seq order.
func payloadOrder(t *testing.T, s event.Store, topic string) []string {
	t.Helper()
	var out []string
	after := uint64(0)
	for {
		recs, err := s.Read(context.Background(), topic, after, 500)
		require.NoError(t, err)
		if len(recs) == 0 {
			return out
		}
		for _, r := range recs {
			out = append(out, string(r.Payload))
			after = r.Seq
		}
	}
}

func testDrainsInOrder(t *testing.T, newStore func(clock.Clock) Store, scale func(int) int) {
	ob := newStore(nil)
	es := event.NewMemoryStore()
	runDrainer(t, outbox.Config{Store: ob, Bus: newBus(t, es)})
	n := scale(500)
	require.NoError(t, ob.Add(context.Background(), msgs("orders", n, nil)...))
	waitStats(t, ob, outbox.Stats{Sent: int64(n)})
	got := payloadOrder(t, es, "orders")
	require.Len(t, got, n)
	for i, p := range got {
		assert.Equal(t, strconv.Itoa(i), p)
	}
}

func testAddRejectsBadInput(t *testing.T, newStore func(clock.Clock) Store, _ func(int) int) {
	ob := newStore(nil)
	ctx := context.Background()
	require.NoError(t, ob.Add(ctx, outbox.Message{ID: "keep", Topic: "t", Payload: []byte(`1`)}))
	for _, tc := range []struct {
		name  string
		msg   outbox.Message
		field string
	}{
		{"bad topic", outbox.Message{Topic: "a b", Payload: []byte(`1`)}, "topic"},
		{"bad payload", outbox.Message{Topic: "t", Payload: []byte(`{`)}, "payload"},
		{"duplicate id", outbox.Message{ID: "keep", Topic: "t", Payload: []byte(`1`)}, "id"},
		// What the Bus would refuse at publish is refused at Add, on
		// every store, rather than failing the row in the drainer later.
		{"payload not UTF-8", outbox.Message{Topic: "t", Payload: []byte("\"\xff\"")}, "payload"},
		{"payload too deep", outbox.Message{Topic: "t", Payload: []byte(strings.Repeat("[", event.MaxJSONDepth+1) + strings.Repeat("]", event.MaxJSONDepth+1))}, "payload"},
		{"key not UTF-8", outbox.Message{Topic: "t", Key: "k\xff", Payload: []byte(`1`)}, "key"},
		{"header not UTF-8", outbox.Message{Topic: "t", Headers: map[string]string{"h": "\xc3"}, Payload: []byte(`1`)}, "headers"},
		{"id not UTF-8", outbox.Message{ID: "\xfe", Topic: "t", Payload: []byte(`1`)}, "id"},
	} {
		err := ob.Add(ctx, outbox.Message{Topic: "t", Payload: []byte(`2`)}, tc.msg)
		assert.ErrorContains(t, err, tc.field, tc.name)
		if tc.name != "duplicate id" {
			assert.ErrorIs(t, err, outbox.ErrInvalid, tc.name)
		}
	}
	st, err := ob.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Pending, "a refused Add stores nothing and loses nothing")
}

// A row reads back with the message's fields, pending, stamped with the
// time of Add.
func testRowsReadBack(t *testing.T, newStore func(clock.Clock) Store, _ func(int) int) {
	fk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ob := newStore(fk)
	ctx := context.Background()
	m := outbox.Message{
		ID: "r-1", Topic: "orders.created", Key: "customer-7",
		Headers: map[string]string{"trace": "abc", "x-empty": ""}, Payload: []byte(`{"total":30,"items":["a","b"]}`),
	}
	require.NoError(t, ob.Add(ctx, m, outbox.Message{ID: "r-2", Topic: "orders.created", Payload: []byte(`"plain"`)}))
	r, err := ob.Row(ctx, "r-1")
	require.NoError(t, err)
	assert.Equal(t, m.ID, r.ID)
	assert.Equal(t, m.Topic, r.Topic)
	assert.Equal(t, m.Key, r.Key)
	assert.Equal(t, m.Headers, r.Headers)
	assert.JSONEq(t, string(m.Payload), string(r.Payload))
	assert.Equal(t, outbox.StatusPending, r.Status)
	assert.Equal(t, fk.Now().UnixMilli(), r.TS)
	assert.Zero(t, r.Attempts)
	assert.True(t, r.SentAt.IsZero())
	r2, err := ob.Row(ctx, "r-2")
	require.NoError(t, err)
	assert.Empty(t, r2.Key)
	assert.Empty(t, r2.Headers)
	_, err = ob.Row(ctx, "absent")
	assert.Error(t, err)
}

// failOnceStore fails the first MarkSent: a crash between publish and
// mark-sent, as the drainer sees it.
type failOnceStore struct {
	outbox.Store
	failed atomic.Bool
}

func (s *failOnceStore) MarkSent(ctx context.Context, token int64, ids ...string) error {
	if s.failed.CompareAndSwap(false, true) {
		return errors.New("crash before mark-sent")
	}
	return s.Store.MarkSent(ctx, token, ids...)
}

func testCrashBetweenPublishAndMarkSent(t *testing.T, newStore func(clock.Clock) Store, _ func(int) int) {
	ob := newStore(nil)
	es := newCountingStore()
	bus := newBus(t, es)
	require.NoError(t, ob.Add(context.Background(), outbox.Message{ID: "row-1", Topic: "t", Payload: []byte(`"x"`)}))
	flaky := &failOnceStore{Store: ob}
	stop := runDrainer(t, outbox.Config{Store: flaky, Bus: bus, Worker: "first"})
	require.Eventually(t, flaky.failed.Load, wait, time.Millisecond)
	stop()
	// A restarted drainer publishes the row again: the same event id,
	// so the topic still holds it once.
	runDrainer(t, outbox.Config{Store: ob, Bus: bus, Worker: "second", LeaseTTL: 50 * time.Millisecond})
	waitStats(t, ob, outbox.Stats{Sent: 1})
	head, err := es.Head(context.Background(), "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), head, "exactly one event in the topic")
	assert.GreaterOrEqual(t, es.count("row-1"), 2, "the row was published twice, stored once")
}

func testTwoDrainersPublishEachRowOnce(t *testing.T, newStore func(clock.Clock) Store, scale func(int) int) {
	ob := newStore(nil)
	es := newCountingStore()
	bus := newBus(t, es)
	n := scale(10000)
	var all []outbox.Message
	for _, topic := range []string{"a", "b", "c", "d"} {
		all = append(all, msgs(topic, n/4, func(i int) string { return "k" + strconv.Itoa(i%7) })...)
	}
	for i := range all {
		all[i].ID = fmt.Sprintf("row-%05d", i)
	}
	runDrainer(t, outbox.Config{Store: ob, Bus: bus, Worker: "d1"})
	runDrainer(t, outbox.Config{Store: ob, Bus: bus, Worker: "d2"})
	for i := 0; i < n; i += 500 {
		require.NoError(t, ob.Add(context.Background(), all[i:i+500]...))
	}
	waitStats(t, ob, outbox.Stats{Sent: int64(n)})
	for _, m := range all {
		require.Equal(t, 1, es.count(m.ID), "row %s published %d times", m.ID, es.count(m.ID))
	}
	for _, topic := range []string{"a", "b", "c", "d"} {
		got := payloadOrder(t, es, topic)
		require.Len(t, got, n/4)
		for i, p := range got {
			require.Equal(t, strconv.Itoa(i), p, "topic %s out of order", topic)
		}
	}
}

// blockingStore blocks the MarkSent of one worker's token until released.
type blockingStore struct {
	outbox.Store
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	result  chan error
}

func (s *blockingStore) MarkSent(ctx context.Context, token int64, ids ...string) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		<-s.release
		err := s.Store.MarkSent(ctx, token, ids...)
		s.result <- err
		return err
	}
	return s.Store.MarkSent(ctx, token, ids...)
}

func testPausedDrainerIsFenced(t *testing.T, newStore func(clock.Clock) Store, _ func(int) int) {
	ob := newStore(nil)
	es := newCountingStore()
	bus := newBus(t, es)
	require.NoError(t, ob.Add(context.Background(), msgs("t", 50, nil)...))
	slow := &blockingStore{Store: ob, entered: make(chan struct{}), release: make(chan struct{}), result: make(chan error, 1)}
	runDrainer(t, outbox.Config{Store: slow, Bus: bus, Worker: "slow", LeaseTTL: 100 * time.Millisecond, BatchSize: 20})
	<-slow.entered // it published a batch and now hangs before marking it
	runDrainer(t, outbox.Config{Store: ob, Bus: bus, Worker: "fast", LeaseTTL: 100 * time.Millisecond})
	waitStats(t, ob, outbox.Stats{Sent: 50})
	close(slow.release)
	assert.ErrorIs(t, <-slow.result, outbox.ErrStaleClaim, "the paused drainer's mark is rejected")
	st, err := ob.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, outbox.Stats{Sent: 50}, st)
	got := payloadOrder(t, es, "t")
	require.Len(t, got, 50, "no row lost, none twice")
	for i, p := range got {
		assert.Equal(t, strconv.Itoa(i), p)
	}
}

func testPoisonRowFailsAndTheRestDrains(t *testing.T, newStore func(clock.Clock) Store, _ func(int) int) {
	ob := newStore(nil)
	es := newCountingStore()
	es.poison = "poison"
	bus := newBus(t, es)
	ctx := context.Background()
	require.NoError(t, ob.Add(ctx,
		outbox.Message{ID: "ok-1", Topic: "t", Key: "a", Payload: []byte(`"one"`)},
		outbox.Message{ID: "bad", Topic: "t", Key: "a", Payload: []byte(`"poison"`)},
		outbox.Message{ID: "after-bad", Topic: "t", Key: "a", Payload: []byte(`"held back"`)},
		outbox.Message{ID: "other-key", Topic: "t", Key: "b", Payload: []byte(`"free"`)},
	))
	const backoff = 20 * time.Millisecond
	runDrainer(t, outbox.Config{Store: ob, Bus: bus, MaxAttempts: 4, Backoff: backoff, MaxBackoff: time.Second})
	waitStats(t, ob, outbox.Stats{Sent: 3, Failed: 1})
	r, err := ob.Row(ctx, "bad")
	require.NoError(t, err)
	assert.Equal(t, outbox.StatusFailed, r.Status)
	assert.Equal(t, 4, r.Attempts)
	assert.Contains(t, r.LastError, "poison")
	es.mu.Lock()
	times := es.times["bad"]
	es.mu.Unlock()
	require.Len(t, times, 4)
	for i := 1; i < len(times); i++ {
		gap := times[i].Sub(times[i-1])
		assert.GreaterOrEqual(t, gap, backoff<<(i-1), "attempt %d came before its backoff", i+1)
	}
	got := payloadOrder(t, es, "t")
	assert.Equal(t, `"one"`, got[0])
	assert.ElementsMatch(t, []string{`"one"`, `"held back"`, `"free"`}, got)
	assert.Less(t, indexOf(got, `"free"`), indexOf(got, `"held back"`), "the other key is not held back by the poison row")
}

// Sent rows older than the retention are deleted by the leading drainer,
// in batches; younger sent rows, pending rows and failed rows stay.
func testRetentionDeletesOldSentRows(t *testing.T, newStore func(clock.Clock) Store, _ func(int) int) {
	ctx := context.Background()
	fk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ob := newStore(fk)
	add := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			require.NoError(t, ob.Add(ctx, outbox.Message{ID: id, Topic: "t", Key: id, Payload: []byte(`1`)}))
		}
	}
	// Rows are marked through the store, as a drainer would, so that the
	// test says when each is sent.
	lease := func() int64 {
		t.Helper()
		tok, ok, err := ob.AcquireLease(ctx, "test", time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
		return tok
	}
	tok := lease()
	add("old-1", "old-2", "old-3", "old-4", "old-5", "failed", "waiting")
	require.NoError(t, ob.MarkSent(ctx, tok, "old-1", "old-2", "old-3", "old-4", "old-5"))
	require.NoError(t, ob.MarkRetry(ctx, tok, outbox.Retry{ID: "failed", Err: "boom", Final: true}))
	require.NoError(t, ob.MarkRetry(ctx, tok, outbox.Retry{ID: "waiting", Err: "boom", Next: fk.Now().Add(1000 * time.Hour)}))
	fk.Advance(2 * time.Hour)
	add("young-1", "young-2")
	tok = lease() // the first one ran out
	require.NoError(t, ob.MarkSent(ctx, tok, "young-1", "young-2"))
	r, err := ob.Row(ctx, "young-1")
	require.NoError(t, err)
	assert.Equal(t, fk.Now().UnixMilli(), r.SentAt.UnixMilli(), "SentAt is the time of MarkSent")

	// The store deletes at most limit rows per call, only sent ones.
	n, err := ob.DeleteSent(ctx, fk.Now().Add(-time.Hour), 2)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	_, err = ob.DeleteSent(ctx, fk.Now(), 0)
	assert.ErrorIs(t, err, outbox.ErrInvalid)
	require.NoError(t, ob.ReleaseLease(ctx, "test", tok))

	// The drainer deletes the rest of the old rows, in batches of 2.
	bus := newBus(t, newCountingStore())
	runDrainer(t, outbox.Config{Store: ob, Bus: bus, Clock: fk, Retention: time.Hour, RetentionBatch: 2, LeaseTTL: time.Hour})
	waitStats(t, ob, outbox.Stats{Pending: 1, Sent: 2, Failed: 1})
	for _, id := range []string{"old-1", "old-2", "old-3", "old-4", "old-5"} {
		_, err := ob.Row(ctx, id)
		assert.Error(t, err, "row %s was sent more than the retention ago", id)
	}
	for id, st := range map[string]outbox.Status{
		"young-1": outbox.StatusSent, "young-2": outbox.StatusSent, "failed": outbox.StatusFailed, "waiting": outbox.StatusPending,
	} {
		r, err := ob.Row(ctx, id)
		if assert.NoError(t, err, "row %s stays", id) {
			assert.Equal(t, st, r.Status, "row %s", id)
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
