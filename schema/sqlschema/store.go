// Package sqlschema is a [schema.Store] in a SQL table, over database/sql:
// PostgreSQL and SQLite (the databases of event/pgstore and
// event/sqlitestore; open the *sql.DB with their OpenDB). It imports no
// driver. The table has the primary key (topic, version), and Add inserts
// with ON CONFLICT DO NOTHING: of two processes adding one version, one
// stores it and the other gets schema.ErrVersionExists.
//
//	st, err := sqlschema.New(db, sqlschema.Config{Dialect: sqlschema.Postgres})
//	err = st.EnsureTable(ctx)
//	reg, err := schema.NewRegistry(ctx, schema.Config{Store: st})
package sqlschema

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/promethean/promlib/schema"
)

// Dialect is a SQL database's placeholder style.
type Dialect int

// The dialects.
const (
	Postgres Dialect = iota + 1 // $1, $2, ...
	SQLite                      // ?
)

// DefaultTable is the table's default name.
const DefaultTable = "promlib_schemas"

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Config configures a [Store].
type Config struct {
	Dialect Dialect
	// Table is the table's name (default "promlib_schemas").
	Table string
}

// Store is a [schema.Store] in a SQL table.
type Store struct {
	db  *sql.DB
	cfg Config
}

var _ schema.Store = (*Store)(nil)

// New returns a Store over db.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: db: nil", schema.ErrInvalid)
	}
	if cfg.Dialect != Postgres && cfg.Dialect != SQLite {
		return nil, fmt.Errorf("%w: Dialect: want sqlschema.Postgres or sqlschema.SQLite", schema.ErrInvalid)
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if !tableName.MatchString(cfg.Table) {
		return nil, fmt.Errorf("%w: Table %q: want letters, digits and _ (at most 63)", schema.ErrInvalid, cfg.Table)
	}
	return &Store{db: db, cfg: cfg}, nil
}

// q rewrites the ? placeholders of query for the dialect and names the
// table for {t}.
func (s *Store) q(query string) string {
	query = strings.ReplaceAll(query, "{t}", s.cfg.Table)
	if s.cfg.Dialect != Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// EnsureTable creates the table if it does not exist.
func (s *Store) EnsureTable(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, s.q(`CREATE TABLE IF NOT EXISTS {t} (
		topic TEXT NOT NULL,
		version INTEGER NOT NULL,
		schema_doc TEXT NOT NULL,
		rule TEXT NOT NULL,
		created_ms BIGINT NOT NULL,
		PRIMARY KEY (topic, version))`))
	if err != nil {
		return fmt.Errorf("sqlschema: create table %s: %w", s.cfg.Table, err)
	}
	return nil
}

// Add implements [schema.Store].
func (s *Store) Add(ctx context.Context, v schema.Version) error {
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO {t} (topic, version, schema_doc, rule, created_ms)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (topic, version) DO NOTHING`),
		v.Topic, v.Version, string(v.Schema), string(v.Rule), v.Created.UnixMilli())
	if err != nil {
		return fmt.Errorf("sqlschema: add %s v%d: %w", v.Topic, v.Version, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlschema: add %s v%d: %w", v.Topic, v.Version, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s v%d", schema.ErrVersionExists, v.Topic, v.Version)
	}
	return nil
}

// Versions implements [schema.Store].
func (s *Store) Versions(ctx context.Context, topic string) ([]schema.Version, error) {
	return s.query(ctx, s.q(`SELECT topic, version, schema_doc, rule, created_ms FROM {t} WHERE topic = ? ORDER BY version`), topic)
}

// All implements [schema.Store].
func (s *Store) All(ctx context.Context) ([]schema.Version, error) {
	return s.query(ctx, s.q(`SELECT topic, version, schema_doc, rule, created_ms FROM {t} ORDER BY topic, version`))
}

func (s *Store) query(ctx context.Context, query string, args ...any) ([]schema.Version, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlschema: read: %w", err)
	}
	defer rows.Close()
	var out []schema.Version
	for rows.Next() {
		var (
			v       schema.Version
			doc     string
			rule    string
			created int64
		)
		if err := rows.Scan(&v.Topic, &v.Version, &doc, &rule, &created); err != nil {
			return nil, fmt.Errorf("sqlschema: read: %w", err)
		}
		if !json.Valid([]byte(doc)) {
			return nil, fmt.Errorf("sqlschema: %s v%d: schema is not JSON", v.Topic, v.Version)
		}
		v.Schema, v.Rule, v.Created = json.RawMessage(doc), schema.Rule(rule), time.UnixMilli(created).UTC()
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlschema: read: %w", err)
	}
	schema.SortVersions(out) // byte order of topics, whatever the collation
	return out, nil
}
