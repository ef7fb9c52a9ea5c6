package sqlitestore

import "github.com/promethean/promlib/event"

// A Store imports records at their seqs ([event.Importer], the shared SQL
// code's ImportRecords and ImportHead), so that [event.Copy] can move
// another store into a SQLite file.
var _ event.Importer = (*Store)(nil)
