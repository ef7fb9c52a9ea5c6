package mongodb

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/promethean/promlib/dedupe/mongodedupe"
	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/outbox/mongooutbox"
	"github.com/promethean/promlib/projector/mongotable"
	"github.com/promethean/promlib/txn/mongotxn"
)

// Config configures [Open]. URL or Client is required; the zero value of
// every other field means its default.
type Config struct {
	// URL is the server's, mongodb://host[:port][/...] or
	// mongodb+srv://host[/...]; Open connects to it (bounded by
	// Store.ConnectTimeout) and Close disconnects.
	URL string
	// Client is the application's client, instead of URL, so that the
	// parts' writes join the application's transactions; Close leaves it
	// connected.
	Client *mongo.Client
	// Database holds every part's collections (default "promlib").
	Database string
	// Store configures the event store; its Database is Config.Database
	// (leave it empty).
	Store mongostore.Config
	// Outbox configures the outbox (its collection, its name).
	Outbox mongooutbox.Config
	// Dedupe configures the dedupe store (its collection).
	Dedupe mongodedupe.Config
}

// Validate reports every problem of c, joined; each names its field.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.URL == "" && c.Client == nil:
		errs = append(errs, fmt.Errorf("%w: URL: empty and no Client, want mongodb://host[:port][/...]", ErrInvalid))
	case c.URL != "" && c.Client != nil:
		errs = append(errs, fmt.Errorf("%w: URL and Client: both set, give one", ErrInvalid))
	}
	if c.Store.Database != "" && c.Store.Database != c.Database {
		errs = append(errs, fmt.Errorf("%w: Store.Database: %q, set Config.Database instead (every part uses it)", ErrInvalid, c.Store.Database))
	}
	return errors.Join(errs...)
}

// DB is a MongoDB database opened once, with the parts of promlib in it.
type DB struct {
	store  *mongostore.Store
	outbox *mongooutbox.Store
	dedupe *mongodedupe.Store
	txn    *mongotxn.Runner

	closeOnce sync.Once
	closeErr  error
}

// Open connects to the server (or takes Config.Client) and creates the
// indexes of the event store, the outbox and the dedupe store. A server
// that does not answer is an error wrapping mongostore.ErrUnreachable.
// Close the DB when done.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	scfg := cfg.Store
	scfg.Database = cfg.Database
	var s *mongostore.Store
	var err error
	if cfg.Client != nil {
		s, err = mongostore.New(cfg.Client, scfg)
	} else {
		s, err = mongostore.Connect(ctx, cfg.URL, scfg)
	}
	if err != nil {
		return nil, err
	}
	db := &DB{store: s}
	if err := db.openParts(ctx, cfg); err != nil {
		_ = db.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return db, nil
}

func (db *DB) openParts(ctx context.Context, cfg Config) error {
	if err := db.store.EnsureIndexes(ctx); err != nil {
		return fmt.Errorf("mongodb: store indexes: %w", err)
	}
	var err error
	if db.outbox, err = mongooutbox.New(db.store.Database(), cfg.Outbox); err != nil {
		return fmt.Errorf("mongodb: Outbox: %w", err)
	}
	if _, err := db.outbox.EnsureIndexes(ctx); err != nil {
		return fmt.Errorf("mongodb: outbox indexes: %w", err)
	}
	if db.dedupe, err = mongodedupe.New(db.store.Database(), cfg.Dedupe); err != nil {
		return fmt.Errorf("mongodb: Dedupe: %w", err)
	}
	if _, err := db.dedupe.EnsureIndexes(ctx); err != nil {
		return fmt.Errorf("mongodb: dedupe indexes: %w", err)
	}
	if db.txn, err = mongotxn.NewRunner(db.store.Client()); err != nil {
		return fmt.Errorf("mongodb: Txn: %w", err)
	}
	return nil
}

// Store returns the event store; give it to event.NewBus.
func (db *DB) Store() *mongostore.Store { return db.store }

// Outbox returns the outbox, whose Add joins a transaction of [DB.Txn].
func (db *DB) Outbox() *mongooutbox.Store { return db.outbox }

// Dedupe returns the dedupe store, whose MarkDone joins a transaction of
// [DB.Txn] (for dedupe.SubscribeExactlyOnceTx).
func (db *DB) Dedupe() *mongodedupe.Store { return db.dedupe }

// Txn returns the runner of transactions on the client (a replica set or
// a sharded cluster): the writes of the outbox, the dedupe store and the
// application's own made with the ctx it passes commit together.
func (db *DB) Txn() *mongotxn.Runner { return db.txn }

// Client returns the client.
func (db *DB) Client() *mongo.Client { return db.store.Client() }

// Database returns the database of every part, with the store's write and
// read concerns (majority).
func (db *DB) Database() *mongo.Database { return db.store.Database() }

// Table returns a changelog table in the database (see [mongotable]): cfg
// as for mongotable.New, whose DB is this database (left nil, or set to
// the same). Call Run on it.
func (db *DB) Table(cfg mongotable.Config) (*mongotable.Table, error) {
	if cfg.DB != nil && (cfg.DB.Name() != db.Database().Name() || cfg.DB.Client() != db.Client()) {
		return nil, fmt.Errorf("%w: Table: Config.DB is another database; leave it nil", ErrInvalid)
	}
	cfg.DB = db.Database()
	return mongotable.New(cfg)
}

// Close stops the store, waiting for its writes until ctx ends, and
// disconnects the client Open connected; an application's client
// (Config.Client) stays connected. Stop what uses the parts (drainers,
// tables, subscriptions) first. Calls after the first return its result.
func (db *DB) Close(ctx context.Context) error {
	db.closeOnce.Do(func() { db.closeErr = db.store.Close(ctx) })
	return db.closeErr
}
