package event_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/promethean/promlib/event"
)

// Records of one account in order, accounts in parallel: the first record
// of acct-1 fails once, and while it backs off only acct-1 waits.
func ExampleWithKeyOrdered() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)

	var mu sync.Mutex
	seen := map[string][]string{}
	done := make(chan struct{})
	n := 0
	_, _ = bus.Subscribe(ctx, "ledger", "balances", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		seen[d.Key] = append(seen[d.Key], fmt.Sprintf("%s#%d", d.Payload, d.Attempt))
		if d.Key == "acct-1" && d.Attempt == 1 && string(d.Payload) == `"open"` {
			return errors.New("database busy") // redelivered after the backoff
		}
		if n++; n == 5 {
			close(done)
		}
		return nil
	}, event.FromEarliest(), event.WithKeyOrdered(), event.WithConcurrency(4),
		event.WithBackoff(10*time.Millisecond, 10*time.Millisecond))

	for _, r := range []struct{ key, op string }{
		{"acct-1", "open"}, {"acct-2", "open"}, {"acct-1", "deposit"}, {"acct-2", "deposit"}, {"acct-1", "withdraw"},
	} {
		_, _ = bus.Publish(ctx, "ledger", []byte(`"`+r.op+`"`), event.WithKey(r.key))
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("acct-1:", strings.Join(seen["acct-1"], " "))
	fmt.Println("acct-2:", strings.Join(seen["acct-2"], " "))
	// Output:
	// acct-1: "open"#1 "open"#2 "deposit"#1 "withdraw"#1
	// acct-2: "open"#1 "deposit"#1
}
