package event

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIDGenFormat checks that an id is a canonical UUIDv7 of the RFC
// variant that holds the time it was made for, and that parseUUID reads
// it back.
func TestIDGenFormat(t *testing.T) {
	t.Parallel()
	var g idGen
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_901_234, time.UTC)
	id, ms := g.next(at)
	assert.Equal(t, at.UnixMilli(), ms)
	u, err := uuid.Parse(id)
	require.NoError(t, err)
	assert.Equal(t, uuid.Version(7), u.Version())
	assert.Equal(t, uuid.RFC4122, u.Variant())
	assert.Equal(t, u.String(), id, "canonical lower-case form")
	sec, nsec := u.Time().UnixTime()
	assert.Equal(t, at.UnixMilli(), sec*1000+nsec/1e6)
	b, ok := parseUUID(id)
	require.True(t, ok)
	assert.Equal(t, [16]byte(u), b)
}

// TestIDGenIncreasing checks that ids increase in the order they are made
// (as strings, which sort as their bytes) when the clock reads the same
// time again, steps back, or is read faster than its fraction changes,
// and that the milliseconds returned are those the id holds.
func TestIDGenIncreasing(t *testing.T) {
	t.Parallel()
	var g idGen
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	times := []time.Time{base, base, base.Add(-time.Second), base.Add(100 * time.Nanosecond), base.Add(time.Millisecond)}
	for range 5000 { // more than the 4,096 fractions of one millisecond
		times = append(times, base.Add(time.Millisecond))
	}
	prev := ""
	for i, at := range times {
		id, ms := g.next(at)
		require.Greater(t, id, prev, "id %d", i)
		u, err := uuid.Parse(id)
		require.NoError(t, err)
		sec, nsec := u.Time().UnixTime()
		require.Equal(t, sec*1000+nsec/1e6, ms, "id %d", i)
		require.GreaterOrEqual(t, ms, base.UnixMilli(), "id %d", i)
		prev = id
	}
	_, ms := g.next(base.Add(time.Millisecond))
	assert.Greater(t, ms, base.Add(time.Millisecond).UnixMilli(), "5,000 ids in one fraction carried into the next millisecond")
}

// TestIDGenConcurrent makes ids from several goroutines at once: each
// goroutine's ids increase, and no id is made twice.
func TestIDGenConcurrent(t *testing.T) {
	t.Parallel()
	var g idGen
	const workers, each = 8, 2000
	out := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				id, _ := g.next(time.Now())
				out[w] = append(out[w], id)
			}
		})
	}
	wg.Wait()
	seen := make(map[string]bool, workers*each)
	for w := range out {
		for i, id := range out[w] {
			require.False(t, seen[id], "id %s made twice", id)
			seen[id] = true
			if i > 0 {
				require.Greater(t, id, out[w][i-1])
			}
		}
	}
	assert.Len(t, seen, workers*each)
}
