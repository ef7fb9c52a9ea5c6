package event_test

import (
	"context"
	"fmt"

	"github.com/promethean/promlib/event"
)

// Copy moves what one store holds into another (here two memory stores;
// a SQLite file into PostgreSQL is the same call): records at their seqs,
// groups with their cursors. Run again, it checks and writes nothing.
func ExampleCopy() {
	ctx := context.Background()
	src := event.NewMemoryStore()
	bus, _ := event.NewBus(src, event.Config{})
	for i := range 3 {
		_, _ = bus.Publish(ctx, "orders", fmt.Appendf(nil, `{"n":%d}`, i))
	}
	_ = bus.Close(ctx) // nothing may write to the source while it is copied

	dst := event.NewMemoryStore()
	rep, err := event.Copy(ctx, dst, src, event.CopyConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("copied", rep.Records)
	rep, _ = event.Copy(ctx, dst, src, event.CopyConfig{})
	fmt.Println("copied", rep.Records, "verified", rep.Verified)

	// Output:
	// copied 3
	// copied 0 verified 3
}
