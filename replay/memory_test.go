package replay_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/replay"
)

// TestExportMemoryIsFlat streams an export of 1,000,000 records (100,000
// with -short or under the race detector) from a memory store through the handler to a writer that
// discards them, sampling the heap as it goes: the heap in use grows by a
// bounded amount, a small fraction of what is exported, because the export
// holds one page of records and one buffer at a time.
func TestExportMemoryIsFlat(t *testing.T) {
	// Not parallel: it measures the heap of the whole process.
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	bus, store := newBus(t)
	fill(t, bus, "big", n, sameTS(1000), nil)
	h := newHandler(t, store, replay.Config{})

	// The store itself is live data of some hundred MB: with the default
	// GOGC the heap may grow by as much again in garbage before a
	// collection. A low GOGC keeps that slack small, so that what is
	// measured is what the export keeps.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse

	var (
		mu      sync.Mutex
		peak    uint64
		samples int
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapInuse)
			samples++
			mu.Unlock()
		}
	}()

	w := &discardWriter{header: make(http.Header)}
	start := time.Now()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/export?topic=big", nil))
	elapsed := time.Since(start)
	close(stop)
	<-sampled

	require.Equal(t, http.StatusOK, w.status)
	require.Equal(t, n, w.lines)
	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, samples, 3, "the export ran long enough to be sampled")
	growth := int64(peak) - int64(base)
	t.Logf("exported %d records, %d MB, in %v (%.0f records/s); heap in use %d MB before, peak growth %.2f MB over %d samples",
		n, w.bytes>>20, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), base>>20, float64(growth)/(1<<20), samples)
	const bound = 32 << 20
	assert.Less(t, growth, int64(bound), "heap growth while exporting")
	assert.Less(t, growth, w.bytes/8, "heap growth is a small fraction of the export")
}
