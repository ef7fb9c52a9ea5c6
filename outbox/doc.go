// Package outbox is the transactional outbox: an application adds the
// events it means to publish to an outbox [Store] in the same transaction
// as its own data, and a [Drainer] publishes them to the [event.Bus]
// afterwards. Either both the data and the event are stored, or neither.
//
//	err := tx.InTx(ctx, func(ctx context.Context) error { // a txn.Runner
//		if _, err := orders.InsertOne(ctx, order); err != nil {
//			return err
//		}
//		return store.Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//	drainer.Notify() // publish now rather than at the next poll
//
// [MemoryStore] keeps rows in process (its Add joins a txn.Memory
// transaction); outbox/mongooutbox keeps them in MongoDB,
// outbox/sqliteoutbox in SQLite and outbox/pgoutbox in PostgreSQL, each
// joining its database's transactions; outbox/outboxtest is the suite
// every store passes.
//
// # Guarantees
//
//   - Each row is published with its id as the event id, and publishing
//     is idempotent by id: a drainer that crashes after publishing a row
//     and before marking it sent publishes it again without a duplicate.
//   - Drainers of one outbox elect a leader by a lease in the store whose
//     token grows on every hand-over; a drainer paused past its lease has
//     its marks refused ([ErrStaleClaim]) instead of overwriting the new
//     leader's. (A drainer paused between claiming and publishing
//     publishes late; keep pauses shorter than the lease.)
//   - Rows of one topic and key are published in the order they were
//     added. A row whose publish fails is retried after an exponential
//     backoff, holding back the rows of its key only, and after
//     MaxAttempts is marked failed with its last error.
//   - A drainer wakes at once on rows added through a store in the same
//     process ([Notifier]), and polls every PollInterval otherwise; rows
//     added in a transaction are visible when it commits.
//   - Sent rows are kept for Config.Retention (default 7 days), then the
//     leading drainer deletes them in batches; pending and failed rows are
//     never deleted. [Store.Stats] counts rows by status (the
//     promlib_outbox_rows gauge of package metrics).
package outbox
