package pgdedupe

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/dedupe/internal/sqldedupe"
	"github.com/promethean/promlib/internal/pgsql"
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

// Store is a [dedupe.TxStore] in PostgreSQL, on a pgx pool: one row per
// key, with its expiry. MarkDone writes in the transaction of the same
// pool that ctx carries (see [pgtxn.Runner]). Expired keys never count;
// [dedupe.RunReaper] deletes them.
//
// [pgtxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/pgtxn#Runner
type Store struct {
	*sqldedupe.Store
	pool *pgxpool.Pool
}

var _ dedupe.TxStore = (*Store)(nil)

// New returns a store in pool's database, in the schema of its
// search_path. It does no I/O; call CreateTables once.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pool: nil", dedupe.ErrInvalid)
	}
	s, err := sqldedupe.New(pgsql.Pool(pool), sqldedupe.Dialect{Name: "pgdedupe", Schema: Schema},
		sqldedupe.Config{Table: cfg.Table, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return &Store{Store: s, pool: pool}, nil
}

// Pool returns the pool the store writes through.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the SQL that creates the table of a store in table, if
// it is absent; CreateTables runs it in one transaction, under an
// advisory lock so that processes starting together do not race.
func Schema(table string) []string {
	return sqldedupe.Schema(table, sqldedupe.Types{Int64: "BIGINT", Lock: `SELECT pg_advisory_xact_lock(7035120813)`})
}
