package projector_test

import (
	"context"
	"fmt"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/projector"
)

// A projector that keeps the balance of each account.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(context.Background())

	type deposit struct {
		Account string `json:"account"`
		Amount  int    `json:"amount"`
	}
	p, err := projector.NewProjector(projector.Config[deposit, int]{
		Bus: bus, Input: "deposits", Output: "balances",
		Key: func(_ *event.Record, d deposit) (string, error) { return d.Account, nil },
		Reduce: func(_ string, balance int, _ bool, d deposit, _ *event.Record) (int, error) {
			return balance + d.Amount, nil
		},
	})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	for _, d := range []deposit{{"alice", 10}, {"bob", 5}, {"alice", 7}} {
		_, _ = event.PublishJSON(ctx, bus, "deposits", d, event.WithKey(d.Account))
	}
	for {
		if b, _ := p.State("alice"); b == 17 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	alice, _ := p.State("alice")
	bob, _ := p.State("bob")
	fmt.Println(alice, bob)
	cancel()
	<-done
	// Output: 17 5
}
