// Package mongodb opens a MongoDB database once and hands out every part
// of promlib that lives in it: the event store ([mongostore]), the outbox
// ([mongooutbox]), the dedupe store ([mongodedupe]), the transaction
// runner ([mongotxn]) and changelog tables ([mongotable]). The
// per-feature packages stay the implementation; this package only wires
// them to one client and one database.
//
//	db, err := mongodb.Open(ctx, mongodb.Config{URL: "mongodb://127.0.0.1:27017"})
//	if err != nil { ... }
//	defer db.Close(ctx)
//	bus, err := event.NewBus(db.Store(), event.Config{})
//	err = db.Txn().InTx(ctx, func(ctx context.Context) error {
//		if _, err := orders.InsertOne(ctx, order); err != nil {
//			return err
//		}
//		return db.Outbox().Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//
// [Open] connects (or takes the application's client, Config.Client),
// and creates the indexes of the store, the outbox and the dedupe store.
// Every part uses the store's database (Config.Database, default
// "promlib"), with its write and read concerns (majority). [DB.Close]
// disconnects a client Open connected, never the application's.
//
// Transactions ([DB.Txn]) need a replica set or a sharded cluster; on a
// standalone server (or the bundled test server) the outbox and the dedupe
// store still work outside transactions: an outbox Add is then one
// InsertMany.
//
// # What it leaves out
//
// Schemas of payloads (schema/mongoschema) are not handed out: the schema
// packages are a Go module of their own (schema/go.mod) that requires this
// one and a JSON Schema compiler; importing them here would make every
// user of the event store require that module and its dependency. Give
// [DB.Database] to mongoschema.
//
// [mongostore]: https://pkg.go.dev/github.com/promethean/promlib/event/mongostore
// [mongooutbox]: https://pkg.go.dev/github.com/promethean/promlib/outbox/mongooutbox
// [mongodedupe]: https://pkg.go.dev/github.com/promethean/promlib/dedupe/mongodedupe
// [mongotxn]: https://pkg.go.dev/github.com/promethean/promlib/txn/mongotxn
// [mongotable]: https://pkg.go.dev/github.com/promethean/promlib/projector/mongotable
package mongodb
