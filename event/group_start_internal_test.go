package event

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A handler goroutine starting a delivery and the group taking it back
// (its lease ran out in the queue, its subscription closed, its partition
// was given up) race; exactly one of them wins, so a delivery counts as an
// attempt exactly when its handler runs. A delivery of an earlier gen
// never starts the current one.
func TestStartAndTakeBackRace(t *testing.T) {
	t.Parallel()
	for i := range 20000 {
		e := &entry{gen: uint32(i%7 + 1)}
		e.started.Store(e.gen - 1)
		var started, taken bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); started = e.tryStart(e.gen, 1) }()
		go func() { defer wg.Done(); taken = e.takeBack() }()
		wg.Wait()
		require.True(t, started != taken, "round %d: started %v, taken back %v", i, started, taken)
		if taken {
			assert.False(t, e.tryStart(e.gen, 2), "a taken-back delivery never starts")
			assert.NotEqual(t, e.gen, e.started.Load())
		} else {
			assert.False(t, e.takeBack(), "a started delivery is not taken back")
			assert.Equal(t, e.gen, e.started.Load())
		}
	}
	e := &entry{gen: 3}
	e.started.Store(2)
	require.True(t, e.tryStart(3, 5))
	assert.False(t, e.tryStart(2, 6), "an earlier delivery's goroutine does not restart it")
	assert.Equal(t, uint32(3), e.started.Load())
	assert.Equal(t, int64(5), e.startedAt.Load())
}
