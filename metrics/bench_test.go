package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/metrics"
)

// BenchmarkBusObserver measures the observer calls of one delivered and
// acked record: Published, Delivered, Handled, Acked.
func BenchmarkBusObserver(b *testing.B) {
	bm, err := metrics.NewBus(metrics.Config{Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bm.Published("orders")
			bm.Delivered("orders", "billing", 1)
			bm.Handled("orders", "billing", time.Millisecond, nil)
			bm.Acked("orders", "billing", 5*time.Millisecond)
		}
	})
}
