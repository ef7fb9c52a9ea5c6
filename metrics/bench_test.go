package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/metrics"
)

// BenchmarkBusObserver measures the metrics of one delivered and acked
// record: the publish interceptor, Delivered, the delivery interceptor,
// Acked.
func BenchmarkBusObserver(b *testing.B) {
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	recs := []event.Record{{Topic: "orders"}}
	publish := bm.PublishInterceptor()(func(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
		return recs, nil
	})
	handle := bm.DeliveryInterceptor()(func(context.Context, *event.Delivery) error { return nil })
	d := &event.Delivery{Record: event.Record{Topic: "orders"}, Group: "billing"}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = publish(ctx, "orders", recs)
			bm.Delivered("orders", "billing", 1)
			_ = handle(ctx, d)
			bm.Acked("orders", "billing", 5*time.Millisecond)
		}
	})
}
