package sqliteoutbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/sqliteoutbox"
	"github.com/promethean/promlib/txn/sqltxn"
)

// An order and its event are stored in one SQLite transaction, and a
// drainer publishes the event once it commits; the order of a failed
// transaction leaves no event behind.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqliteoutbox")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	file, err := sqlitestore.OpenDB(filepath.Join(dir, "shop.db"), sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer file.Close() // the writer and the readers
	db := file.Write   // every write and transaction goes through the writer
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}
	store, err := sqliteoutbox.New(db, sqliteoutbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CreateTables(ctx); err != nil {
		log.Fatal(err)
	}
	tx, err := sqltxn.NewRunner(db, sqltxn.Config{})
	if err != nil {
		log.Fatal(err)
	}
	order := func(id string, fail error) error {
		return tx.InTx(ctx, func(ctx context.Context) error {
			t, _ := sqltxn.Tx(ctx)
			if _, err := t.ExecContext(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
				return err
			}
			if err := store.Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":"` + id + `"}`)}); err != nil {
				return err
			}
			return fail
		})
	}
	fmt.Println(order("o-1", nil))
	fmt.Println(order("o-2", errors.New("payment refused")))

	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close(ctx)
	got := make(chan string, 2)
	_, err = bus.Subscribe(ctx, "order.created", "mail", func(ctx context.Context, d *event.Delivery) error {
		got <- string(d.Payload)
		return nil
	}, event.FromEarliest())
	if err != nil {
		log.Fatal(err)
	}
	drainer, err := outbox.NewDrainer(outbox.Config{Store: store, Bus: bus})
	if err != nil {
		log.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- drainer.Run(dctx) }()
	fmt.Println("published:", <-got)
	stop()
	<-done
	// Output:
	// <nil>
	// payment refused
	// published: {"id":"o-1"}
}
