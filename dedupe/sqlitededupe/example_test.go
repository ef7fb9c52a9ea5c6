package sqlitededupe_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/sqlitededupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/txn"
	"github.com/promethean/promlib/txn/sqltxn"
)

// Each order event credits its customer once: the credit and the event's
// dedupe mark commit in one SQLite transaction, so a redelivery finds the
// mark and does not credit again.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlitededupe")
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
	if _, err := db.ExecContext(ctx, `CREATE TABLE credits (customer TEXT PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	store, err := sqlitededupe.New(db, sqlitededupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CreateTables(ctx); err != nil {
		log.Fatal(err)
	}
	runner, err := sqltxn.NewRunner(db, sqltxn.Config{})
	if err != nil {
		log.Fatal(err)
	}
	// committed tells when a delivery's transaction committed.
	committed := make(chan struct{}, 1)
	tx := txn.RunnerFunc(func(ctx context.Context, fn func(context.Context) error) error {
		err := runner.InTx(ctx, fn)
		if err == nil {
			committed <- struct{}{}
		}
		return err
	})

	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close(ctx)
	sub, err := dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
		Bus: bus, Topic: "orders", Group: "credits", Store: store, Tx: tx,
		Handler: func(ctx context.Context, d *event.Delivery) error {
			t, _ := sqltxn.Tx(ctx)
			_, err := t.ExecContext(ctx, `INSERT INTO credits (customer, n) VALUES ($1, 1)
				ON CONFLICT (customer) DO UPDATE SET n = credits.n + 1`, d.Key)
			return err
		},
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{event.FromEarliest()}},
	})
	if err != nil {
		log.Fatal(err)
	}
	rec, err := bus.Publish(ctx, "orders", []byte(`{"total":30}`), event.WithKey("ada"))
	if err != nil {
		log.Fatal(err)
	}
	<-committed
	if err := sub.Close(); err != nil {
		log.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT n FROM credits WHERE customer = 'ada'`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	seen, err := store.Seen(ctx, dedupe.Key("orders", "credits", rec.ID))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("credits:", n)
	fmt.Println("marked done with them:", seen)
	// Output:
	// credits: 1
	// marked done with them: true
}
