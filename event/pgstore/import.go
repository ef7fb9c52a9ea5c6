package pgstore

import "github.com/promethean/promlib/event"

// A Store imports records at their seqs ([event.Importer], the shared SQL
// code's ImportRecords and ImportHead), so that [event.Copy] can move
// another store into PostgreSQL.
var _ event.Importer = (*Store)(nil)
