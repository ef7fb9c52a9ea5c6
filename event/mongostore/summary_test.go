package mongostore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pevent "github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// Waiting publishers make batches of a few records each; the summaries of
// many such batches share an update: the store writes a round of them at
// most every 50 ms (summaryEvery in summary.go), besides the rounds a
// flush asks for. An update per batch was as many commands again as the
// inserts.
func TestSummariesShareUpdates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, cnt := countedStore(t, nil)

	const summaryEvery = 50 * time.Millisecond
	start := time.Now()
	const callers, each = 16, 20
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := s.Append(ctx, "t", []pevent.Record{rec("t", fmt.Sprintf("c%d-%d", c, i))})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	topics, err := s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 1)
	assert.Equal(t, int64(callers*each), topics[0].Events, "every append counted")
	assert.Equal(t, uint64(callers*each), topics[0].LastSeq)
	elapsed := time.Since(start)
	inserts, summaries := cnt.n.Load(), cnt.summaries.Load()
	// The first round at once, one per summaryEvery after it, and the one
	// ListTopics asked for.
	most := 2 + int64(elapsed/summaryEvery)
	t.Logf("%d appends in %v: %d inserts, %d summary updates (at most %d)", callers*each, elapsed.Round(time.Millisecond), inserts, summaries, most)
	assert.LessOrEqual(t, summaries, most, "more summary updates than rounds: an update per batch or near it")
	if inserts <= 2*most {
		t.Logf("the inserts were too slow to tell an update per batch from the pacing")
	}
}

// ListTopics counts every append that returned before it, and answers
// while appends go on: it does not wait for the topic to fall idle.
func TestListTopicsWhileAppending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := countedStore(t, nil)

	var appended atomic.Int64
	progress := make(chan struct{}, 1) // a value after each append
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := s.Append(ctx, "t", []pevent.Record{rec("t", fmt.Sprintf("r%d", i))})
			if !assert.NoError(t, err) {
				return
			}
			appended.Add(1)
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for range 3 {
		for range 5 { // some appends since the last ListTopics
			select {
			case <-progress:
			case <-done:
				t.Fatal("the appends stopped")
			}
		}
		before := appended.Load()
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		topics, err := s.ListTopics(wait)
		cancel()
		require.NoError(t, err, "ListTopics waited for the appends to stop")
		require.Len(t, topics, 1)
		assert.GreaterOrEqual(t, topics[0].Events, before, "an append that returned before ListTopics is not counted")
	}
}

// Close writes the summaries queued: a store opened afterwards counts
// every append.
func TestCloseWritesSummaries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testDB(t)
	onDB := func(c *mongostore.Config) { c.Database = db }
	a, _ := countedStore(t, onDB)
	for i := range 50 {
		_, err := a.Append(ctx, "t", []pevent.Record{rec("t", fmt.Sprintf("r%d", i))})
		require.NoError(t, err)
	}
	require.NoError(t, a.Close(ctx))
	b, cnt := countedStore(t, onDB)
	topics, err := b.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 1)
	assert.Equal(t, int64(50), topics[0].Events)
	assert.Zero(t, cnt.summaries.Load(), "the second store had a summary of its own to write")
}
