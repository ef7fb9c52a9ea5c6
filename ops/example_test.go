package ops_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

func Example() {
	ctx := context.Background()
	// The Bus and its store tell the time by one clock: lag_ms is by it.
	clk := clock.NewFake(time.UnixMilli(5_000))
	bus, _ := event.NewBus(event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}), event.Config{Clock: clk})
	defer bus.Close(ctx)

	for i, ts := range []int64{1_000, 2_000, 3_000} {
		_, _ = bus.Publish(ctx, "orders", []byte(`{}`), event.WithTS(ts), event.WithID(fmt.Sprint("order-", i+1)))
	}
	// The billing group has settled the first record.
	_, _ = bus.ResetCursor(ctx, "orders", "billing", event.AtSeq(2), false)

	h, err := ops.NewHandler(ops.Config{
		Bus:    bus,
		Groups: map[string][]string{"orders": {"billing"}},
		Clock:  clk,
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle(h.Prefix()+"/", h)

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/ops/lag?topic=orders&group=billing", nil))
	fmt.Print(w.Body)
	// Output:
	// {"topic":"orders","group":"billing","head":3,"committed":1,"partitions":[{"partition":0,"cursor":1,"in_flight":0}],"lag":2,"lag_ms":3000,"oldest":{"seq":2,"id":"order-2","ts":2000},"members":[],"unsettled":0,"last_active":5000,"dead_letters":{"topic":"orders.dlq","head":0,"pending":0}}
}
