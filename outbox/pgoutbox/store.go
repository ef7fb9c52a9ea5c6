package pgoutbox

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/internal/pgsql"
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

// Store is an [outbox.Store] in PostgreSQL, on a pgx pool. Add writes in
// the transaction of the same pool that ctx carries (see [pgtxn.Runner]);
// Row reads a row back.
//
// [pgtxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/pgtxn#Runner
type Store struct {
	*sqloutbox.Store
	pool *pgxpool.Pool
}

var (
	_ outbox.Store    = (*Store)(nil)
	_ outbox.Notifier = (*Store)(nil)
)

// New returns an outbox in pool's database, in the schema of its
// search_path. It does no I/O; call CreateTables once.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, invalid("pool")
	}
	s, err := sqloutbox.New(pgsql.Pool(pool), sqloutbox.Dialect{Name: "pgoutbox", Schema: Schema, Params: sqlconn.Dollars},
		sqloutbox.Config{Table: cfg.Table, Name: cfg.Name, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return &Store{Store: s, pool: pool}, nil
}

// Pool returns the pool the store writes through.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the SQL that creates the tables of an outbox whose rows
// are in table, if they are absent; CreateTables runs it in one
// transaction, under an advisory lock so that processes starting together
// do not race.
func Schema(table string) []string {
	return sqloutbox.Schema(table, sqloutbox.Types{
		Seq: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", Int64: "BIGINT", Bytes: "BYTEA",
		Lock: `SELECT pg_advisory_xact_lock(7035120812)`,
	})
}

func invalid(field string) error {
	return fmt.Errorf("%w: %s: nil", outbox.ErrInvalid, field)
}
