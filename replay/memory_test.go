package replay_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/replay"
)

// TestExportMemoryIsFlat streams an export of 1,000,000 records (100,000
// with -short or under the race detector) from a memory store through the handler to a writer that
// discards them, sampling the heap as it goes: the live heap grows by a
// bounded amount, a small fraction of what is exported, because the export
// holds one page of records and one buffer at a time.
//
// The samples are taken in the writer, in the middle of the export, after
// a collection: what is measured is what the export keeps, not the garbage
// a loaded machine's collector has not caught up with yet (the heap in use
// sampled on a ticker counted that, and crossed the bound under load).
func TestExportMemoryIsFlat(t *testing.T) {
	// Not parallel: it measures the heap of the whole process.
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	bus, store := newBus(t)
	fill(t, bus, "big", n, sameTS(1000), nil)
	h := newHandler(t, store, replay.Config{})

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc

	w := &heapSampler{discardWriter: discardWriter{header: make(http.Header)}, every: 5 * n / 100_000}
	start := time.Now()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/export?topic=big", nil))
	elapsed := time.Since(start)

	require.Equal(t, http.StatusOK, w.status)
	require.Equal(t, n, w.lines)
	require.Greater(t, w.samples, 3, "the export was sampled")
	growth := int64(w.peak) - int64(base)
	t.Logf("exported %d records, %d MB, in %v (%.0f records/s); live heap %d MB before, peak growth %.2f MB over %d samples",
		n, w.bytes>>20, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), base>>20, float64(growth)/(1<<20), w.samples)
	const bound = 32 << 20
	assert.Less(t, growth, int64(bound), "heap growth while exporting")
	assert.Less(t, growth, w.bytes/8, "heap growth is a small fraction of the export")
}

// heapSampler is a discardWriter that, on every every-th write (while the
// export holds a page and its buffer), collects garbage and records the
// live heap: some 80 samples of an export, at a write per 32 KB buffer.
type heapSampler struct {
	discardWriter
	every, writes, samples int
	peak                   uint64
	ms                     runtime.MemStats
}

func (w *heapSampler) Write(p []byte) (int, error) {
	w.writes++
	if w.writes%w.every == 0 {
		runtime.GC()
		runtime.ReadMemStats(&w.ms)
		w.peak = max(w.peak, w.ms.HeapAlloc)
		w.samples++
	}
	return w.discardWriter.Write(p)
}
