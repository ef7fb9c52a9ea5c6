package replay

import (
	"errors"
	"log/slog"
	"time"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
)

// Defaults of [Config].
const (
	DefaultLimit          = 100
	DefaultMaxLimit       = 1000
	DefaultExportPageSize = 1000
	// DefaultExportWriteTimeout is the write deadline of each page of an
	// export.
	DefaultExportWriteTimeout = 30 * time.Second
)

// Config configures a [Handler]. The zero value of each field means its
// default; Store is required.
type Config struct {
	// Store holds the topics. /latest needs it to be an [event.KeyStore]
	// too, and answers 501 otherwise.
	Store event.Store
	// Verifier checks the "Authorization: Bearer" token of every request:
	// no token or a bad one is answered 401; the principal's policy must
	// then allow [acl.Replay] on the topic (403). A principal already in
	// the request's context ([auth.Middleware] in front of the handler) is
	// taken as it is. nil means open access: anyone who reaches the
	// handler may read every topic.
	Verifier auth.Verifier
	// DefaultLimit is the page size of /replay and /latest when the request
	// gives no limit (default 100, or MaxLimit when that is smaller).
	DefaultLimit int
	// MaxLimit is the largest limit a request may give; a larger one is
	// answered 400 (default 1000, or DefaultLimit when that is larger).
	MaxLimit int
	// ExportPageSize is how many records /export reads from the store at a
	// time (default 1000). It bounds the export's memory.
	ExportPageSize int
	// ExportWriteTimeout is how long the client may take to receive one
	// page of an export (default 30s). The response's write deadline is
	// moved forward before each page, so an export may run longer than the
	// http.Server's WriteTimeout, but a client that stops reading is cut
	// off within this time.
	ExportWriteTimeout time.Duration
	// Logger receives store failures at warn level and aborted exports at
	// debug level; nil discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxLimit == 0 {
		c.MaxLimit = max(DefaultMaxLimit, c.DefaultLimit)
	}
	if c.DefaultLimit == 0 {
		c.DefaultLimit = min(DefaultLimit, c.MaxLimit)
	}
	if c.ExportPageSize == 0 {
		c.ExportPageSize = DefaultExportPageSize
	}
	if c.ExportWriteTimeout == 0 {
		c.ExportWriteTimeout = DefaultExportWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of c, joined.
func (c *Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, invalid("Store", "nil"))
	}
	if c.DefaultLimit < 0 {
		errs = append(errs, invalid("DefaultLimit", "%d is negative", c.DefaultLimit))
	}
	if c.MaxLimit < 0 {
		errs = append(errs, invalid("MaxLimit", "%d is negative", c.MaxLimit))
	}
	if c.DefaultLimit > c.MaxLimit && c.MaxLimit > 0 {
		errs = append(errs, invalid("DefaultLimit", "%d is over MaxLimit %d", c.DefaultLimit, c.MaxLimit))
	}
	if c.ExportPageSize < 0 {
		errs = append(errs, invalid("ExportPageSize", "%d is negative", c.ExportPageSize))
	}
	if c.ExportWriteTimeout < 0 {
		errs = append(errs, invalid("ExportWriteTimeout", "%v is negative", c.ExportWriteTimeout))
	}
	return errors.Join(errs...)
}
