// Package watchhub is the watch and poll hub of the durable event stores
// (the SQL store of event/sqlitestore and event/pgstore, and
// event/mongostore): the watchers in this process of each topic, woken
// when the store appends and when a poller, one per watched topic and
// store, finds records that other processes appended. It implements
// [event.Notifier]'s Watch for them.
//
// # Why internal/
//
// It is in internal/ and not in event/internal because internal/sqlstore,
// one of its two users, is in internal/ itself (the bench program reads
// its batch limits), and Go's internal rule would hide event/internal
// from it.
//
// [event.Notifier]: https://pkg.go.dev/github.com/promethean/promlib/event#Notifier
package watchhub
