package pgdedupe_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/pgdedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/txn/pgtxn"
)

// Each order event credits its customer once: the credit and the event's
// dedupe mark commit in one transaction, so a redelivery finds the mark
// and does not credit again. (It needs a server, so it is compiled, not
// run.)
func Example() {
	ctx := context.Background()
	var pool *pgxpool.Pool // connected by the application
	var bus *event.Bus     // the application's bus

	store, err := pgdedupe.New(pool, pgdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CreateTables(ctx); err != nil {
		log.Fatal(err)
	}
	tx, err := pgtxn.NewRunner(pool, pgtxn.Config{})
	if err != nil {
		log.Fatal(err)
	}
	_, err = dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
		Bus: bus, Topic: "orders", Group: "credits", Store: store, Tx: tx,
		Handler: func(ctx context.Context, d *event.Delivery) error {
			t, _ := pgtxn.Tx(ctx)
			_, err := t.Exec(ctx, `INSERT INTO credits (customer, n) VALUES ($1, 1)
				ON CONFLICT (customer) DO UPDATE SET n = credits.n + 1`, d.Key)
			return err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
}
