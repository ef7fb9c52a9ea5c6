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
	return []string{
		`SELECT pg_advisory_xact_lock(7035120812)`,
		`CREATE TABLE IF NOT EXISTS ` + table + ` (
			seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			id         TEXT NOT NULL UNIQUE,
			topic      TEXT NOT NULL,
			rkey       TEXT NOT NULL,
			headers    TEXT,
			payload    BYTEA NOT NULL,
			ts         BIGINT NOT NULL,
			status     TEXT NOT NULL,
			attempts   INTEGER NOT NULL DEFAULT 0,
			last_error TEXT NOT NULL DEFAULT '',
			next_at    BIGINT NOT NULL DEFAULT 0,
			token      BIGINT NOT NULL DEFAULT 0,
			sent_at    BIGINT NOT NULL DEFAULT 0
		)`,
		`CREATE INDEX IF NOT EXISTS ` + table + `_status ON ` + table + ` (status, seq)`,
		`CREATE INDEX IF NOT EXISTS ` + table + `_sent ON ` + table + ` (sent_at) WHERE status = 'sent'`,
		`CREATE TABLE IF NOT EXISTS ` + table + `_lease (
			name    TEXT PRIMARY KEY,
			worker  TEXT NOT NULL,
			token   BIGINT NOT NULL,
			expires BIGINT NOT NULL
		)`,
	}
}

func invalid(field string) error {
	return fmt.Errorf("%w: %s: nil", outbox.ErrInvalid, field)
}
