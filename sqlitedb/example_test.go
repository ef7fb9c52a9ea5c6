package sqlitedb_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/sqlitedb"
	"github.com/promethean/promlib/txn/sqltxn"
)

// One file holds the events, the application's orders and the outbox: an
// order and its event commit together, and a drainer publishes the event
// once they have.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlitedb")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := sqlitedb.Open(ctx, sqlitedb.Config{Path: filepath.Join(dir, "shop.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close(ctx)
	bus, err := event.NewBus(db.Store(), event.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close(ctx)

	if _, err := db.SQL().ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}
	err = db.Txn().InTx(ctx, func(ctx context.Context) error {
		tx, _ := sqltxn.Tx(ctx)
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (?)`, "o-1"); err != nil {
			return err
		}
		return db.Outbox().Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":"o-1"}`)})
	})
	if err != nil {
		log.Fatal(err)
	}

	got := make(chan string, 1)
	_, err = bus.Subscribe(ctx, "order.created", "mail", func(ctx context.Context, d *event.Delivery) error {
		got <- string(d.Payload)
		return nil
	}, event.FromEarliest())
	if err != nil {
		log.Fatal(err)
	}
	drainer, err := outbox.NewDrainer(outbox.Config{Store: db.Outbox(), Bus: bus})
	if err != nil {
		log.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = drainer.Run(dctx) }()
	fmt.Println(<-got)
	stop()
	<-done
	// Output: {"id":"o-1"}
}
