package metrics_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/metrics"
)

func Example() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	bm, err := metrics.NewBusObserver(metrics.Config{Registerer: reg})
	if err != nil {
		panic(err)
	}
	bus, _ := event.NewBus(event.NewMemoryStore(), bm.Instrument(event.Config{}))
	defer bus.Close(ctx)
	if err := bm.Watch(bus); err != nil {
		panic(err)
	}

	_, _ = bus.Publish(ctx, "orders", []byte(`{"id":1}`))
	_, _ = bus.Publish(ctx, "orders", []byte(`{"id":2}`))

	// GET /metrics
	w := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if strings.HasPrefix(line, "promlib_events_published_total") {
			fmt.Println(line)
		}
	}
	// Output: promlib_events_published_total{topic="orders"} 2
}
