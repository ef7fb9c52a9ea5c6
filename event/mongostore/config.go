package mongostore

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// Defaults of [Config].
const (
	DefaultDatabase       = "promlib"
	DefaultMaxBatch       = 1000
	DefaultMaxBatchBytes  = 8 << 20
	DefaultWriteTimeout   = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultPollInterval   = 500 * time.Millisecond
	DefaultCacheRecords   = 10000
	DefaultCacheBytes     = 32 << 20
	DefaultTombstoneTTL   = time.Hour
)

// Config configures a [Store]. The zero value of every field means its
// default.
type Config struct {
	// Database holds the store's collections (default "promlib").
	Database string
	// CollectionPrefix is put before the collection names events, latest,
	// topics, cursors, members, groupstate and groups (default none), so
	// that several stores can share a database.
	CollectionPrefix string
	// WriteConcern of every write (default majority). With w:1 an
	// acknowledged publish can be rolled back when the primary fails over
	// before it replicated: the event is lost, and its seq is given to
	// another event, which a consumer whose cursor already passed that seq
	// never sees. Committed cursors and leases can be rolled back too
	// (redeliveries, a partition briefly held twice).
	WriteConcern *writeconcern.WriteConcern
	// ReadConcern of reads (default majority), so that a consumer never
	// reads an event that a failover could still roll back.
	ReadConcern *readconcern.ReadConcern
	// MaxBatch bounds the records written by one InsertMany of the group
	// commit (default 1000), and MaxBatchBytes their size as documents
	// (default 8 MiB). A single Append larger than these is written whole.
	MaxBatch      int
	MaxBatchBytes int
	// WriteTimeout bounds one group-commit write, retries included
	// (default 30s).
	WriteTimeout time.Duration
	// ConnectTimeout bounds connecting, server selection and the first ping
	// in [Connect] (default 10s). It stays the server-selection timeout of
	// the client Connect makes, so calls fail after it when the server goes
	// away.
	ConnectTimeout time.Duration
	// PollInterval is how often a topic with watchers (see [Store.Watch])
	// is checked for records appended by other processes (default 500ms).
	// Appends through this store wake watchers at once.
	PollInterval time.Duration
	// CacheRecords and CacheBytes bound the cache of recent records each
	// topic has in this store (defaults 10000 records and 32 MiB), from
	// which consumers in this process read what this store appended or
	// another consumer read, instead of asking the server again. A
	// negative CacheRecords turns the cache off.
	CacheRecords int
	CacheBytes   int
	// TombstoneTTL is how long the tombstone of a pruned record is kept
	// before it is removed for good (default 1h; negative: kept for ever).
	// A tombstone keeps its seq taken, so that a writer whose idea of the
	// head is old cannot store a record there: writers therefore refresh
	// their idea of a topic's head when it is older than TombstoneTTL/4,
	// and TombstoneTTL must be at least 4 times WriteTimeout. See the
	// package documentation.
	TombstoneTTL time.Duration
	// DeadLetterTopic names the topic that receives documents of topic that
	// do not decode (default [event.DeadLetterTopic], as the Bus's default).
	DeadLetterTopic func(topic string) string
	// Logger receives warnings, such as documents that do not decode; nil
	// discards them.
	Logger *slog.Logger
	// Clock tells the time of membership and partition lease expiries, of
	// the records that dead-letter undecodable documents, and the age of
	// tombstones and of an appender's idea of a topic's head (see
	// TombstoneTTL); nil means the system clock. Processes sharing a group
	// or a topic must agree on the time.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if c.WriteConcern == nil {
		c.WriteConcern = writeconcern.Majority()
	}
	if c.ReadConcern == nil {
		c.ReadConcern = readconcern.Majority()
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.CacheRecords == 0 {
		c.CacheRecords = DefaultCacheRecords
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.TombstoneTTL == 0 {
		c.TombstoneTTL = DefaultTombstoneTTL
	}
	if c.DeadLetterTopic == nil {
		c.DeadLetterTopic = event.DeadLetterTopic
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Clock = clock.Or(c.Clock)
}

// Validate reports every problem of c, joined. Zero values are valid (they
// mean the default).
func (c *Config) Validate() error {
	var errs []error
	if c.Database != "" {
		if len(c.Database) > 63 {
			errs = append(errs, invalid("Database", "%d bytes, more than 63", len(c.Database)))
		}
		if i := strings.IndexAny(c.Database, "/\\. \"$*<>:|?\x00"); i >= 0 {
			errs = append(errs, invalid("Database", "%q contains %q, which MongoDB does not allow", c.Database, c.Database[i]))
		}
	}
	if i := strings.IndexAny(c.CollectionPrefix, "$\x00"); i >= 0 {
		errs = append(errs, invalid("CollectionPrefix", "%q contains %q, which MongoDB does not allow", c.CollectionPrefix, c.CollectionPrefix[i]))
	}
	if strings.HasPrefix(c.CollectionPrefix, "system.") {
		errs = append(errs, invalid("CollectionPrefix", "%q: the system. prefix is reserved", c.CollectionPrefix))
	}
	if c.MaxBatch < 0 {
		errs = append(errs, invalid("MaxBatch", "%d is negative", c.MaxBatch))
	}
	if c.MaxBatchBytes < 0 {
		errs = append(errs, invalid("MaxBatchBytes", "%d is negative", c.MaxBatchBytes))
	}
	if c.WriteTimeout < 0 {
		errs = append(errs, invalid("WriteTimeout", "%v is negative", c.WriteTimeout))
	}
	if c.PollInterval < 0 {
		errs = append(errs, invalid("PollInterval", "%v is negative", c.PollInterval))
	}
	if c.CacheBytes < 0 {
		errs = append(errs, invalid("CacheBytes", "%d is negative", c.CacheBytes))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, invalid("ConnectTimeout", "%v is negative", c.ConnectTimeout))
	}
	if c.TombstoneTTL > 0 {
		wt := c.WriteTimeout
		if wt <= 0 {
			wt = DefaultWriteTimeout
		}
		if c.TombstoneTTL < 4*wt {
			errs = append(errs, invalid("TombstoneTTL", "%v is less than 4 times WriteTimeout (%v)", c.TombstoneTTL, wt))
		}
	}
	return errors.Join(errs...)
}

// invalid builds an error that wraps event.ErrInvalid and names the field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: mongostore: %s: %s", event.ErrInvalid, field, fmt.Sprintf(format, args...))
}
