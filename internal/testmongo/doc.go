// Package testmongo gives tests a MongoDB: the server at MONGO_URL (the
// bundled test server under make test), a client shared by a test binary,
// and fresh databases dropped when a test ends.
//
// Without MONGO_URL, or with a server that does not answer, a test is
// skipped, except under CI=true, where it fails: CI must run the Mongo
// tests. The one skip CI allows is [RequireTransactions]'s, on a server
// without multi-document transactions (the bundled test server), with
// the server's reason printed.
//
// # Why internal/
//
// It is test infrastructure of every layer (the event store, the outbox,
// dedupe and txn backends, the entry points, storeurl, the programs) and of
// the nested modules (schema, contrib/watermill), so it is in the
// module's internal/, which all of them may import.
package testmongo
