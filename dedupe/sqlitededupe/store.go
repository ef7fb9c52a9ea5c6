package sqlitededupe

import (
	"database/sql"
	"fmt"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/internal/sqldedupe"
	"github.com/promethean/promlib/internal/sqlconn"
)

// DefaultTable is the table's default name.
const DefaultTable = sqldedupe.DefaultTable

// Config configures a [Store]. The zero value of every field means its
// default.
type Config struct {
	// Table holds the keys (default "promlib_dedupe"). Letters, digits
	// and _.
	Table string
	// Clock tells the time of claims and expiries; nil means the system
	// clock.
	Clock clock.Clock
}

// Store is a [dedupe.TxStore] in a SQLite database: one row per key, with
// its expiry. MarkDone writes in the transaction of the same *sql.DB
// that ctx carries (see [sqltxn.Runner]). Expired keys never count;
// [dedupe.RunReaper] deletes them.
//
// [sqltxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/sqltxn#Runner
type Store struct {
	*sqldedupe.Store
	db *sql.DB
}

var _ dedupe.TxStore = (*Store)(nil)

// New returns a store in db. It does no I/O; call CreateTables once.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: db: nil", dedupe.ErrInvalid)
	}
	s, err := sqldedupe.New(sqlconn.SQL(db), sqldedupe.Dialect{Name: "sqlitededupe", Schema: Schema},
		sqldedupe.Config{Table: cfg.Table, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return &Store{Store: s, db: db}, nil
}

// DB returns the database the store writes in.
func (s *Store) DB() *sql.DB { return s.db }

// Schema returns the SQL that creates the table of a store in table, if
// it is absent; CreateTables runs it.
func Schema(table string) []string {
	return sqldedupe.Schema(table, sqldedupe.Types{Int64: "INTEGER"})
}
