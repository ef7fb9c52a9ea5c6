package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTopicOf: with -topics N event i goes to topic i mod N, and the run's
// topics are the N names; with one topic, every event goes to
// bench.events.
func TestTopicOf(t *testing.T) {
	t.Parallel()
	one := &Options{Topics: 1}
	assert.Equal(t, []string{benchTopic}, topicNames(one))
	assert.Equal(t, benchTopic, topicOf(one, 7))

	three := &Options{Topics: 3}
	assert.Equal(t, []string{"bench.events.0", "bench.events.1", "bench.events.2"}, topicNames(three))
	for i, want := range []string{"bench.events.0", "bench.events.1", "bench.events.2", "bench.events.0"} {
		assert.Equal(t, want, topicOf(three, i), "event %d", i)
	}
}

// TestTopicsFlag: -topics is 1 by default, 1 or more, and only for -mode
// bus; -raw is on by default.
func TestTopicsFlag(t *testing.T) {
	t.Parallel()
	o, err := parseFlags(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 1, o.Topics)
	assert.True(t, o.Raw)
	o, err = parseFlags([]string{"-topics", "10000", "-raw=false"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 10000, o.Topics)
	assert.False(t, o.Raw)
	for _, args := range [][]string{{"-topics", "0"}, {"-mode", "ws", "-topics", "3"}} {
		_, err := parseFlags(args, func(string) string { return "" }, io.Discard)
		assert.ErrorContains(t, err, "-topics", "%q", args)
	}
}

// TestGrowth runs -mode bus over several topics and groups on the memory
// store and on SQLite: every group of every topic gets each event of its
// topic once, and the growth figures are filled: the store keeps every
// payload, so what an event adds is at least most of its payload (the
// figures are beyond it), and each group adds memory of its own.
//
// The figures are the whole process's memory, so this test runs alone:
// not parallel, its cases one after the other. Beside another test (or its
// other case) its live heap falls when that one's garbage is collected,
// and a group's figure comes out negative.
func TestGrowth(t *testing.T) {
	for _, tt := range []struct {
		name  string
		store func(t *testing.T) string
		n     int // few on SQLite: over many topics each append is of one record (see PERFORMANCE.md)
	}{
		{name: "memory", store: func(*testing.T) string { return "memory" }, n: 12000},
		{name: "sqlite", store: func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "b.db") }, n: 600},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const payload = 1024
			o := &Options{Store: tt.store(t), Mode: "bus", N: tt.n, Payload: payload, Groups: 2, Topics: 40,
				Publishers: 2, Consumers: 1, MaxInFlight: 100, Partitions: 1}
			r, _ := runBusTest(t, o)

			assert.Zero(t, r.Lost)
			assert.Zero(t, r.Duplicates)
			assert.Equal(t, 40, r.Topics)
			assert.Zero(t, r.RawInsertPS, "no raw baseline without -raw")
			assert.Positive(t, r.LiveBytesPerGroup, "80 groups")
			assert.Positive(t, r.SubscribeS)
			if tt.name == "memory" {
				assert.Greater(t, r.LiveBytesPerEvent, -payload/2.0, "the store keeps each payload")
				assert.Greater(t, r.RSSBytesPerEvent, -payload/2.0, "the store keeps each payload")
				assert.Zero(t, r.FileMB)
				return
			}
			assert.Greater(t, r.FileBytesPerEvent, -payload/2.0, "the file keeps each payload")
			assert.Greater(t, r.FileMB, float64(o.N*payload)/(1<<20), "the file holds every payload")
		})
	}
}

// TestTenths: the first group's rate over the first and the last tenth of
// its deliveries made while publishing went on; deliveries after the last
// publish are left out.
func TestTenths(t *testing.T) {
	t.Parallel()
	tl := newTally(101, 1)
	for i := range 100 {
		at := time.Duration(i) * time.Millisecond // 1,000/s for the first half
		if i >= 50 {
			at = (50 + 2*time.Duration(i-50)) * time.Millisecond // then 500/s
		}
		tl.pubAt[i].Store(int64(at))
		tl.counts[0][i].Store(1)
	}
	tl.pubAt[100].Store(int64(148 * time.Millisecond)) // the last publish
	tl.counts[0][100].Store(1)
	tl.lat[0][100] = 500 // delivered long after it: left out
	first, last := tl.tenths()
	assert.InDelta(t, 1000, first, 0.001)
	assert.InDelta(t, 500, last, 0.001)

	few := newTally(10, 1)
	first, last = few.tenths()
	assert.Zero(t, first, "nothing delivered")
	assert.Zero(t, last)
}

// TestPublishOnly: -groups 0 publishes with no consumer, for the rate of
// publishing alone beside the raw baseline of the same run; every event
// is stored, and it is refused outside -mode bus.
func TestPublishOnly(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	_, err := parseFlags([]string{"-mode", "ws", "-groups", "0"}, env, io.Discard)
	assert.ErrorContains(t, err, "-groups 0")
	_, err = parseFlags([]string{"-groups", "-1"}, env, io.Discard)
	assert.ErrorContains(t, err, "-groups")

	path := filepath.Join(t.TempDir(), "b.db")
	o := &Options{Store: "sqlite:" + path, Mode: "bus", N: 500, Payload: 64, Groups: 0, Topics: 1,
		Publishers: 2, Consumers: 1, MaxInFlight: 100, Partitions: 1}
	r, head := runBusTest(t, o)
	assert.Positive(t, r.PublishPerS)
	assert.Zero(t, r.DeliverPerS)
	assert.Zero(t, r.Lost)
	assert.Zero(t, r.RSSBytesPerGroup, "no group")
	assert.EqualValues(t, o.N+o.Warmup, head, "every event stored")
}

// runBusTest runs -mode bus with o on its store and returns the result
// and the head of the first topic when the run is over.
func runBusTest(t *testing.T, o *Options) (Result, uint64) {
	t.Helper()
	require.NoError(t, o.parseStore())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be, err := openBackend(ctx, o)
	require.NoError(t, err)
	defer be.Close()
	var r Result
	require.NoError(t, runBus(ctx, o, be, &r))
	head, err := be.Store.Head(ctx, topicOf(o, 0))
	require.NoError(t, err)
	return r, head
}
