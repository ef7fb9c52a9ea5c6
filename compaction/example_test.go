package compaction_test

import (
	"context"
	"fmt"

	"github.com/promethean/promlib/compaction"
	"github.com/promethean/promlib/event"
)

// A consumer that starts cold: it gets the latest state of every key, then
// every later change.
func ExampleWarm() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	for _, v := range []string{`"idle"`, `"busy"`} {
		_, _ = bus.Publish(ctx, "worker.state", []byte(v), event.WithKey("w1"))
	}

	changes := make(chan string, 10)
	sub, err := compaction.Warm(ctx, bus, "worker.state", "ui-1", func(ctx context.Context, r *event.Record) error {
		changes <- r.Key + "=" + string(r.Payload)
		return nil
	})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	_, _ = bus.Publish(ctx, "worker.state", []byte(`"idle"`), event.WithKey("w1"))
	fmt.Println(<-changes) // the latest state, not its history
	fmt.Println(<-changes) // then what changes
	// Output:
	// w1="busy"
	// w1="idle"
}
