package event_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/promethean/promlib/event"
)

// A stateful consumer: a count of events per partition, kept in a store
// (a map here; a table in a real service). The member loads a partition's
// count when it is assigned the partition and saves it when the partition
// is revoked, so the member that takes it over next goes on from there.
func ExampleWithRebalanceHooks() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{Partitions: 2})
	defer bus.Close(ctx)

	stored := map[int]int{} // the store: partition -> count
	var mu sync.Mutex
	counts := map[int]int{} // this member's state, per partition it holds
	assign := func(ctx context.Context, p int) {
		mu.Lock()
		defer mu.Unlock()
		counts[p] = stored[p]
	}
	revoke := func(ctx context.Context, p int) {
		mu.Lock()
		defer mu.Unlock()
		stored[p] = counts[p]
		delete(counts, p)
	}
	done := make(chan struct{})
	n := 0
	sub, _ := bus.Subscribe(ctx, "clicks", "counter", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		counts[d.Partition]++
		if n++; n == 10 {
			close(done)
		}
		return nil
	}, event.FromEarliest(), event.WithRebalanceHooks(assign, revoke))

	for i := range 10 {
		_, _ = bus.Publish(ctx, "clicks", []byte(`{}`), event.WithKey(fmt.Sprintf("user-%d", i)))
	}
	<-done
	_ = sub.Close() // revokes both partitions: their counts are saved
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("saved:", stored[0]+stored[1], "events over", len(stored), "partitions; held now:", len(counts))
	// Output:
	// saved: 10 events over 2 partitions; held now: 0
}
