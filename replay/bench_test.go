package replay_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/replay"
)

// BenchmarkExport measures an export of 100,000 records through the
// handler to a writer that discards them.
func BenchmarkExport(b *testing.B) {
	const n = 100_000
	bus, store := newBus(b)
	fill(b, bus, "t", n, sameTS(1000), nil)
	h := newHandler(b, store, replay.Config{})
	for _, format := range []string{replay.FormatNDJSON, replay.FormatJSON} {
		b.Run(format, func(b *testing.B) {
			var bytes int64
			b.ReportAllocs()
			for b.Loop() {
				w := &discardWriter{header: make(http.Header)}
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/export?topic=t&format="+format, nil))
				require.GreaterOrEqual(b, w.lines, n)
				bytes = w.bytes
			}
			b.SetBytes(bytes)
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
