package event

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewIDFormat checks that an id is a canonical UUIDv7 of the RFC
// variant that holds the time it was made at, and that parseUUID reads it
// back.
func TestNewIDFormat(t *testing.T) {
	t.Parallel()
	before := time.Now().UnixMilli()
	id, ms := newID()
	after := time.Now().UnixMilli()
	assert.GreaterOrEqual(t, ms, before)
	assert.LessOrEqual(t, ms, after+1, "a fraction carried into the next millisecond at most")
	u, err := uuid.Parse(id)
	require.NoError(t, err)
	assert.Equal(t, uuid.Version(7), u.Version())
	assert.Equal(t, uuid.RFC4122, u.Variant())
	assert.Equal(t, u.String(), id, "canonical lower-case form")
	sec, nsec := u.Time().UnixTime()
	assert.Equal(t, ms, sec*1000+nsec/1e6)
	b, ok := parseUUID(id)
	require.True(t, ok)
	assert.Equal(t, [16]byte(u), b)
}

// TestNewIDIncreasing checks that ids increase in the order they are made
// (as strings, which sort as their bytes), also when they are made faster
// than the clock's fraction of a millisecond changes, and that the
// milliseconds returned are those the id holds.
func TestNewIDIncreasing(t *testing.T) {
	t.Parallel()
	prev := ""
	for i := range 10000 { // more than the 4,096 fractions of one millisecond
		id, ms := newID()
		require.Greater(t, id, prev, "id %d", i)
		u, err := uuid.Parse(id)
		require.NoError(t, err)
		sec, nsec := u.Time().UnixTime()
		require.Equal(t, sec*1000+nsec/1e6, ms, "id %d", i)
		prev = id
	}
}

// TestNewIDConcurrent makes ids from several goroutines at once: each
// goroutine's ids increase, and no id is made twice.
func TestNewIDConcurrent(t *testing.T) {
	t.Parallel()
	const workers, each = 8, 2000
	out := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				id, _ := newID()
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

// BenchmarkNewID measures an id, from goroutines at once as publishers
// make them.
func BenchmarkNewID(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = newID()
		}
	})
}

// TestIDRandFillsEveryByte reads lengths that are and are not multiples
// of eight: every byte of the buffer is written, none past it.
func TestIDRandFillsEveryByte(t *testing.T) {
	for n := 0; n <= 24; n++ {
		buf := make([]byte, n+1)
		seen := make([]map[byte]bool, n)
		for k := range seen {
			seen[k] = map[byte]bool{}
		}
		for range 64 {
			buf[n] = 0xaa
			got, err := idRand{}.Read(buf[:n])
			require.NoError(t, err)
			require.Equal(t, n, got)
			require.Equal(t, byte(0xaa), buf[n], "byte past the buffer written")
			for k := range n {
				seen[k][buf[k]] = true
			}
		}
		for k := range n {
			require.Greater(t, len(seen[k]), 8, "byte %d of %d: too few values in 64 reads", k, n)
		}
	}
}
