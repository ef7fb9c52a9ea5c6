package storeurl

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/mongodb"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/pgdb"
	"github.com/promethean/promlib/sqlitedb"
	"github.com/promethean/promlib/txn"
)

// Database is an open database of any kind: what memory, SQLite,
// PostgreSQL and MongoDB have in common.
type Database interface {
	// Kind is the database's kind; Kind().Name() its name for people.
	Kind() Kind
	// Location is where it was opened.
	Location() Location
	// Store is the event store; give it to event.NewBus.
	Store() event.Store
	// Outbox is the transactional outbox beside the events; its Add
	// joins a transaction of Txn.
	Outbox() outbox.Store
	// Dedupe is the dedupe store beside the events; its MarkDone joins a
	// transaction of Txn.
	Dedupe() dedupe.TxStore
	// Txn runs functions in transactions of the database (MongoDB's need
	// a replica set).
	Txn() txn.Runner
	// Close closes what Open opened (not an application's pool or client
	// given in Config). Stop what uses the database first.
	Close(ctx context.Context) error
}

// Config configures [Open]: the settings of each kind, passed through to
// its package. The field the string gives (SQLite.Path, Postgres.URL,
// MongoDB.URL) must be left empty; the zero value of every other field
// means its default.
type Config struct {
	SQLite   sqlitedb.Config
	Postgres pgdb.Config
	MongoDB  mongodb.Config
	// Logger receives the store's warnings where its own config has no
	// Logger; nil discards them.
	Logger *slog.Logger
}

// Open parses s ([Parse]) and opens the database there ([Location.Open]).
func Open(ctx context.Context, s string, cfg Config) (Database, error) {
	loc, err := Parse(s)
	if err != nil {
		return nil, err
	}
	return loc.Open(ctx, cfg)
}

// Open opens the database at l: it creates the tables or indexes of the
// event store, the outbox and the dedupe store if they are absent (see
// sqlitedb.Open, pgdb.Open, mongodb.Open). Close the Database when done.
func (l Location) Open(ctx context.Context, cfg Config) (Database, error) {
	switch l.Kind {
	case KindMemory:
		return &memoryDB{
			store:  event.NewMemoryStore(),
			outbox: outbox.NewMemoryStore(),
			dedupe: dedupe.NewMemoryStore(),
			txn:    txn.NewMemory(),
		}, nil
	case KindSQLite:
		c := cfg.SQLite
		if c.Path != "" {
			return nil, fmt.Errorf("%w: SQLite.Path: %q, the string gives the path; leave it empty", ErrInvalid, c.Path)
		}
		c.Path = l.Path
		if c.Store.Logger == nil {
			c.Store.Logger = cfg.Logger
		}
		db, err := sqlitedb.Open(ctx, c)
		if err != nil {
			return nil, err
		}
		return &sqliteDB{db: db, loc: l}, nil
	case KindPostgres:
		c := cfg.Postgres
		if c.URL != "" {
			return nil, fmt.Errorf("%w: Postgres.URL: set, the string gives the URL; leave it empty", ErrInvalid)
		}
		c.URL = l.URL
		if c.Store.Logger == nil {
			c.Store.Logger = cfg.Logger
		}
		db, err := pgdb.Open(ctx, c)
		if err != nil {
			return nil, err
		}
		return &postgresDB{db: db, loc: l}, nil
	case KindMongoDB:
		c := cfg.MongoDB
		if c.URL != "" || c.Client != nil {
			return nil, fmt.Errorf("%w: MongoDB.URL, MongoDB.Client: set, the string gives the server; leave them empty", ErrInvalid)
		}
		c.URL = l.URL
		if c.Store.Logger == nil {
			c.Store.Logger = cfg.Logger
		}
		db, err := mongodb.Open(ctx, c)
		if err != nil {
			return nil, err
		}
		return &mongoDB{db: db, loc: l}, nil
	}
	return nil, fmt.Errorf("%w: Location: kind %q, want one from Parse", ErrInvalid, l.Kind)
}

// SQLite returns the SQLite database behind d (its changelog tables, its
// SQL connection), and false for another kind.
func SQLite(d Database) (*sqlitedb.DB, bool) {
	s, ok := d.(*sqliteDB)
	if !ok {
		return nil, false
	}
	return s.db, true
}

// Postgres returns the PostgreSQL database behind d (its changelog
// tables, its pool, its schema), and false for another kind.
func Postgres(d Database) (*pgdb.DB, bool) {
	p, ok := d.(*postgresDB)
	if !ok {
		return nil, false
	}
	return p.db, true
}

// MongoDB returns the MongoDB database behind d (its changelog tables,
// its client), and false for another kind.
func MongoDB(d Database) (*mongodb.DB, bool) {
	m, ok := d.(*mongoDB)
	if !ok {
		return nil, false
	}
	return m.db, true
}

// memoryDB is the memory store and its in-process outbox, dedupe store
// and transactions (txn.Memory).
type memoryDB struct {
	store  *event.MemoryStore
	outbox *outbox.MemoryStore
	dedupe *dedupe.MemoryStore
	txn    *txn.Memory
}

func (m *memoryDB) Kind() Kind                      { return KindMemory }
func (m *memoryDB) Location() Location              { return Location{Kind: KindMemory} }
func (m *memoryDB) Store() event.Store              { return m.store }
func (m *memoryDB) Outbox() outbox.Store            { return m.outbox }
func (m *memoryDB) Dedupe() dedupe.TxStore          { return m.dedupe }
func (m *memoryDB) Txn() txn.Runner                 { return m.txn }
func (m *memoryDB) Close(ctx context.Context) error { return nil }

type sqliteDB struct {
	db  *sqlitedb.DB
	loc Location
}

func (s *sqliteDB) Kind() Kind                      { return KindSQLite }
func (s *sqliteDB) Location() Location              { return s.loc }
func (s *sqliteDB) Store() event.Store              { return s.db.Store() }
func (s *sqliteDB) Outbox() outbox.Store            { return s.db.Outbox() }
func (s *sqliteDB) Dedupe() dedupe.TxStore          { return s.db.Dedupe() }
func (s *sqliteDB) Txn() txn.Runner                 { return s.db.Txn() }
func (s *sqliteDB) Close(ctx context.Context) error { return s.db.Close(ctx) }

type postgresDB struct {
	db  *pgdb.DB
	loc Location
}

func (p *postgresDB) Kind() Kind                      { return KindPostgres }
func (p *postgresDB) Location() Location              { return p.loc }
func (p *postgresDB) Store() event.Store              { return p.db.Store() }
func (p *postgresDB) Outbox() outbox.Store            { return p.db.Outbox() }
func (p *postgresDB) Dedupe() dedupe.TxStore          { return p.db.Dedupe() }
func (p *postgresDB) Txn() txn.Runner                 { return p.db.Txn() }
func (p *postgresDB) Close(ctx context.Context) error { return p.db.Close(ctx) }

type mongoDB struct {
	db  *mongodb.DB
	loc Location
}

func (m *mongoDB) Kind() Kind                      { return KindMongoDB }
func (m *mongoDB) Location() Location              { return m.loc }
func (m *mongoDB) Store() event.Store              { return m.db.Store() }
func (m *mongoDB) Outbox() outbox.Store            { return m.db.Outbox() }
func (m *mongoDB) Dedupe() dedupe.TxStore          { return m.db.Dedupe() }
func (m *mongoDB) Txn() txn.Runner                 { return m.db.Txn() }
func (m *mongoDB) Close(ctx context.Context) error { return m.db.Close(ctx) }

var (
	_ Database = (*memoryDB)(nil)
	_ Database = (*sqliteDB)(nil)
	_ Database = (*postgresDB)(nil)
	_ Database = (*mongoDB)(nil)
)
