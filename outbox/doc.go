// Package outbox is the transactional outbox: an application writes the
// events it means to publish into an outbox [Store] in the same
// transaction as its own data, and a [Drainer] publishes them to the
// [event.Bus] afterwards. Either both the data and the event are stored,
// or neither.
//
// # Rows
//
// [Store.Add] stores [Message] values as pending rows, in order. Each row's
// id becomes the published event's id, and publishing is idempotent by id,
// so a drainer that crashes after publishing a row and before marking it
// sent publishes it again later without a duplicate event.
//
// # Stores
//
// [MemoryStore] keeps rows in process, for tests and examples; package
// outbox/mongooutbox keeps them in MongoDB. A store writes in the caller's
// transaction when the context carries one (package txn):
//
//	err := tx.InTx(ctx, func(ctx context.Context) error {
//		if _, err := orders.InsertOne(ctx, order); err != nil {
//			return err
//		}
//		return store.Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//	drainer.Notify() // publish now rather than at the next poll
//
// # Drainers
//
// Drainers of one outbox elect a leader through a lease kept in the store;
// the others stand by and take over when its lease expires. Every lease
// hand-over increases the lease's token; only the current leader may
// claim rows, and a drainer stamps the rows it marks (sent or retried)
// with its token and may not mark a row that a drainer with a newer token
// marked. A drainer that was paused past its lease finds its marks
// rejected ([ErrStaleClaim]) instead of overwriting the new leader's work.
// (A drainer paused between claiming and publishing publishes late when it
// resumes; the events are not duplicated, since ids are, but they may
// arrive after later rows of their key. Keep pauses shorter than the
// lease, which is what the lease is for.)
//
// Claims are batched. Rows of one topic are published together, in order;
// a row whose publish fails is retried after an exponential backoff and,
// after MaxAttempts, marked failed with its last error. While a row waits
// for its retry, the rows behind it with the same topic and key (its
// ordering key) wait too; other keys drain on.
//
// A drainer wakes at once when rows are added through a store in the same
// process (see [Notifier]); otherwise it polls every PollInterval. Rows
// added in a transaction become visible when it commits: call
// [Drainer.Notify] after the commit to skip the wait.
package outbox
