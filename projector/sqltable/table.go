package sqltable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/projector/internal/changelog"
)

// Defaults of [Config].
const (
	DefaultBatchSize     = 256
	DefaultFlushInterval = 20 * time.Millisecond
)

// Config configures a [Table]. The zero value of every field but Bus,
// Topic, DB, Dialect and Table means its default.
type Config struct {
	Bus   *event.Bus
	Topic string
	// DB is the database of the table, and Dialect its kind. Open a
	// PostgreSQL one with pgstore.OpenDB, a SQLite one with
	// sqlitestore.OpenDB (its DB.Write) or take a store's (Store.DB).
	DB      *sql.DB
	Dialect Dialect
	// Table names the view of the live rows; the rows, with the markers of
	// deleted keys, are in <Table>_changelog. Lower-case letters, digits
	// and _, at most MaxTableLen bytes.
	Table string
	// Group is the consumer group (default "changelog.<Table>").
	Group string
	// BatchSize bounds the events of one transaction (default 256), and
	// FlushInterval how long a batch waits for more (default 20ms).
	BatchSize     int
	FlushInterval time.Duration
	// Subscribe are options of the group's subscription (the table sets
	// ManualAck, FromEarliest and a MaxInFlight of 2*BatchSize unless
	// given).
	Subscribe []event.SubscribeOption
	// Logger receives write errors and skipped records; nil discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Group == "" {
		c.Group = "changelog." + c.Table
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of c, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Bus == nil {
		errs = append(errs, invalid("Bus", "nil"))
	}
	if err := event.ValidateTopic(c.Topic); err != nil {
		errs = append(errs, err)
	}
	if c.DB == nil {
		errs = append(errs, invalid("DB", "nil"))
	}
	if c.Dialect != Postgres && c.Dialect != SQLite {
		errs = append(errs, invalid("Dialect", "%v: want sqltable.Postgres or sqltable.SQLite", c.Dialect))
	}
	if err := validateTable(c.Table); err != nil {
		errs = append(errs, err)
	}
	if c.Group != "" {
		if err := event.ValidateGroup(c.Group); err != nil {
			errs = append(errs, err)
		}
	}
	if c.BatchSize < 0 {
		errs = append(errs, invalid("BatchSize", "negative"))
	}
	if c.FlushInterval < 0 {
		errs = append(errs, invalid("FlushInterval", "negative"))
	}
	return errors.Join(errs...)
}

// Table keeps a SQL table equal to the latest value per key of a topic.
type Table struct {
	cfg Config
	// rows is the table of rows and markers, view the view of live rows,
	// rebuild the table a rebuild fills.
	rows, view, rebuild string
	// mu is held while a batch is written and while Rebuild swaps, so
	// that this process's writes wait for the swap instead of the
	// database's lock.
	mu sync.Mutex
	// fail, set by tests, is called at points of each write of a batch (0
	// before its transaction, 1 in it after half the rows, 2 after its
	// commit); an error stops the write there, as a crash would.
	fail func(point int) error
}

// New returns a Table for cfg; EnsureTable creates it in the database and
// Run keeps it.
func New(cfg Config) (*Table, error) {
	cfg.Subscribe = append([]event.SubscribeOption(nil), cfg.Subscribe...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := event.ValidateGroup(cfg.Group); err != nil {
		return nil, err
	}
	return &Table{
		cfg: cfg, view: cfg.Table, rows: cfg.Table + "_changelog", rebuild: cfg.Table + "_changelog_rebuild",
	}, nil
}

// Group returns the consumer group of the table.
func (t *Table) Group() string { return t.cfg.Group }

// Lag returns the status of the table's group ([event.Bus.GroupStatus]):
// its lag (Lag, LagMs), cursors and members.
func (t *Table) Lag(ctx context.Context) (event.GroupStatus, error) {
	return t.cfg.Bus.GroupStatus(ctx, t.cfg.Topic, t.cfg.Group)
}

// EnsureTable creates the table of rows and the view of live rows if they
// are absent.
func (t *Table) EnsureTable(ctx context.Context) error {
	return t.inTx(ctx, func(tx *sql.Tx) error {
		if t.cfg.Dialect == Postgres {
			// Processes starting together do not race to create.
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "promlib.sqltable."+t.rows); err != nil {
				return err
			}
		}
		for _, q := range []string{
			`CREATE TABLE IF NOT EXISTS ` + quote(t.rows) + ` (` + t.cfg.Dialect.columns() + `)`,
			t.cfg.Dialect.createView(t.view, t.rows),
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		// IF NOT EXISTS keeps an object of the name that is not ours.
		if _, err := tx.ExecContext(ctx, `SELECT key, seq, ts, deleted, value, data, content_type FROM `+quote(t.rows)+` WHERE 1 = 0`); err != nil {
			return fmt.Errorf("%s is not the table of a changelog table: %w", t.rows, err)
		}
		if t.cfg.Dialect == SQLite {
			var typ string
			if err := tx.QueryRowContext(ctx, `SELECT type FROM sqlite_master WHERE name = $1`, t.view).Scan(&typ); err != nil {
				return err
			}
			if typ != "view" {
				return fmt.Errorf("%s is not the view of a changelog table but a %s", t.view, typ)
			}
		}
		return nil
	}, "create "+t.view)
}

// inTx runs fn in a transaction and commits it; what names the work in
// the error.
func (t *Table) inTx(ctx context.Context, fn func(tx *sql.Tx) error, what string) error {
	tx, err := t.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqltable: %s: %w", what, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return fmt.Errorf("sqltable: %s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqltable: %s: commit: %w", what, err)
	}
	return nil
}

// Run consumes the topic and writes the table until ctx ends or a write
// fails; it returns ctx's error or the write's. Deliveries not written go
// back to the group when Run returns. The table must exist
// ([Table.EnsureTable]).
func (t *Table) Run(ctx context.Context) error {
	return changelog.Consumer{
		Bus: t.cfg.Bus, Topic: t.cfg.Topic, Group: t.cfg.Group,
		BatchSize: t.cfg.BatchSize, FlushInterval: t.cfg.FlushInterval, Subscribe: t.cfg.Subscribe,
		Name: "sqltable", Table: t.cfg.Table, Logger: t.cfg.Logger,
		Write: t.write,
	}.Run(ctx)
}

func (t *Table) crash(point int) error {
	if t.fail == nil {
		return nil
	}
	return t.fail(point)
}
