package pgdb_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/pgdb"
	"github.com/promethean/promlib/txn/pgtxn"
)

// One Open gives the event store, the outbox and the transactions of the
// database: an order and its event commit together, and a drainer
// publishes the event once they have. (It needs a server, so it is
// compiled, not run.)
func Example() {
	ctx := context.Background()
	db, err := pgdb.Open(ctx, pgdb.Config{URL: "postgres://app@db.internal/shop", Schema: "shop"})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close(ctx)
	bus, err := event.NewBus(db.Store(), event.Config{Partitions: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close(ctx)

	drainer, err := outbox.NewDrainer(outbox.Config{Store: db.Outbox(), Bus: bus})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = drainer.Run(ctx) }()

	err = db.Txn().InTx(ctx, func(ctx context.Context) error {
		tx, _ := pgtxn.Tx(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, "o-1"); err != nil {
			return err
		}
		return db.Outbox().Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":"o-1"}`)})
	})
	if err != nil {
		log.Fatal(err)
	}
}

// With the application's own pool, the parts use it (and its schema);
// Close leaves it open. (Compiled, not run.)
func Example_pool() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal/shop?search_path=shop")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db, err := pgdb.Open(ctx, pgdb.Config{Pool: pool})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close(ctx)
	_ = db.Store() // the store connects with the pool's connection string
}
