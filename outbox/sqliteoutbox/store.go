package sqliteoutbox

import (
	"database/sql"
	"fmt"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/internal/sqlconn"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/internal/sqloutbox"
)

// DefaultTable is the rows table's default name.
const DefaultTable = sqloutbox.DefaultTable

// Config configures a [Store]. The zero value of every field means its
// default.
type Config struct {
	// Table holds the rows (default "promlib_outbox"); the drainers' lease
	// is in Table+"_lease". Letters, digits and _.
	Table string
	// Name tells several outboxes sharing one lease table apart (default
	// "default").
	Name string
	// Clock tells the time of leases, retries and row timestamps; nil
	// means the system clock.
	Clock clock.Clock
}

// Store is an [outbox.Store] in a SQLite database. Add writes in the
// transaction of the same *sql.DB that ctx carries (see
// [sqltxn.Runner]); Row reads a row back.
//
// [sqltxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/sqltxn#Runner
type Store struct {
	*sqloutbox.Store
	db *sql.DB
}

var (
	_ outbox.Store    = (*Store)(nil)
	_ outbox.Notifier = (*Store)(nil)
)

// New returns an outbox in db. It does no I/O; call CreateTables once.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, invalid("db")
	}
	s, err := sqloutbox.New(sqlconn.SQL(db), sqloutbox.Dialect{Name: "sqliteoutbox", Schema: Schema, Params: sqlconn.Questions},
		sqloutbox.Config{Table: cfg.Table, Name: cfg.Name, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return &Store{Store: s, db: db}, nil
}

// DB returns the database the store writes in.
func (s *Store) DB() *sql.DB { return s.db }

// Schema returns the SQL that creates the tables of an outbox whose rows
// are in table, if they are absent; CreateTables runs it.
func Schema(table string) []string {
	return sqloutbox.Schema(table, sqloutbox.Types{Seq: "INTEGER PRIMARY KEY AUTOINCREMENT", Int64: "INTEGER", Bytes: "BLOB"})
}

func invalid(field string) error {
	return fmt.Errorf("%w: %s: nil", outbox.ErrInvalid, field)
}
