package txn_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/txn"
)

// A row added inside a transaction exists only once the transaction
// commits; a rolled-back transaction leaves nothing behind.
func ExampleMemory() {
	ctx := context.Background()
	ob := outbox.NewMemoryStore()
	tx := txn.NewMemory()

	_ = tx.InTx(ctx, func(ctx context.Context) error {
		// The application's own writes go here, in the same transaction.
		return ob.Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":1}`)})
	})
	err := tx.InTx(ctx, func(ctx context.Context) error {
		if err := ob.Add(ctx, outbox.Message{Topic: "order.created", Payload: []byte(`{"id":2}`)}); err != nil {
			return err
		}
		return errors.New("payment refused") // rolls back the row above
	})
	st, _ := ob.Stats(ctx)
	fmt.Println(err)
	fmt.Println("pending rows:", st.Pending)
	// Output:
	// payment refused
	// pending rows: 1
}
