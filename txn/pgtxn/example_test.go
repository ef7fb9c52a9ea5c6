package pgtxn_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/pgoutbox"
	"github.com/promethean/promlib/txn/pgtxn"
)

// An order and its outbox row commit together in one PostgreSQL
// transaction. (It needs a server, so it is compiled, not run.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PG_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	ob, err := pgoutbox.New(pool, pgoutbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := ob.CreateTables(ctx); err != nil {
		log.Fatal(err)
	}
	tx, err := pgtxn.NewRunner(pool, pgtxn.Config{})
	if err != nil {
		log.Fatal(err)
	}
	err = tx.InTx(ctx, func(ctx context.Context) error {
		t, _ := pgtxn.Tx(ctx)
		if _, err := t.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, "o-1"); err != nil {
			return err
		}
		return ob.Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":"o-1"}`)})
	})
	if err != nil {
		log.Fatal(err)
	}
}
