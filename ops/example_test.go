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
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)

	for i, ts := range []int64{1_000, 2_000, 3_000} {
		_, _ = bus.Publish(ctx, "orders", []byte(`{}`), event.WithTS(ts), event.WithID(fmt.Sprint("order-", i+1)))
	}
	// The billing group has settled the first record.
	_ = bus.SetCursor(ctx, "orders", "billing", 1)

	h, err := ops.NewHandler(ops.Config{
		Bus:    bus,
		Groups: map[string][]string{"orders": {"billing"}},
		Clock:  clock.NewFake(time.UnixMilli(5_000)),
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
	// {"topic":"orders","group":"billing","head":3,"committed":1,"partitions":{"0":1},"lag":2,"lag_ms":3000,"oldest":{"seq":2,"id":"order-2","ts":2000}}
}
