package pgoutbox_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/pgoutbox"
	"github.com/promethean/promlib/txn/pgtxn"
)

// An order and its event are stored in one transaction; a drainer
// publishes the event to the bus once it commits. (It needs a server, so
// it is compiled, not run.)
func Example() {
	ctx := context.Background()
	var pool *pgxpool.Pool // connected by the application
	var bus *event.Bus     // the application's bus

	store, err := pgoutbox.New(pool, pgoutbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CreateTables(ctx); err != nil {
		log.Fatal(err)
	}
	drainer, err := outbox.NewDrainer(outbox.Config{Store: store, Bus: bus})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = drainer.Run(ctx) }()

	tx, err := pgtxn.NewRunner(pool, pgtxn.Config{})
	if err != nil {
		log.Fatal(err)
	}
	err = tx.InTx(ctx, func(ctx context.Context) error {
		t, _ := pgtxn.Tx(ctx)
		if _, err := t.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, "o-1"); err != nil {
			return err
		}
		return store.Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":"o-1"}`)})
	})
	if err != nil {
		log.Fatal(err)
	}
	drainer.Notify() // publish now rather than at the next poll
}
