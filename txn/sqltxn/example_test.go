package sqltxn_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/txn/sqltxn"
)

// The statements of a transaction commit together; a failed one leaves
// nothing behind.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqltxn")
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
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	tx, err := sqltxn.NewRunner(db, sqltxn.Config{})
	if err != nil {
		log.Fatal(err)
	}
	insert := func(ctx context.Context, id string, total int) error {
		t, _ := sqltxn.Tx(ctx)
		_, err := t.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES ($1, $2)`, id, total)
		return err
	}

	err = tx.InTx(ctx, func(ctx context.Context) error { return insert(ctx, "o-1", 30) })
	fmt.Println("first:", err)
	err = tx.InTx(ctx, func(ctx context.Context) error {
		if err := insert(ctx, "o-2", 40); err != nil {
			return err
		}
		return errors.New("payment refused")
	})
	fmt.Println("second:", err)

	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", n)
	// Output:
	// first: <nil>
	// second: payment refused
	// orders: 1
}
