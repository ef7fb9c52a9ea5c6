package ops

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"strings"
	"time"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// Defaults of [Config].
const (
	DefaultPrefix        = "/ops"
	DefaultPeekLimit     = 100
	DefaultMaxLimit      = 1000
	DefaultChartWindow   = 15 * time.Minute
	DefaultChartInterval = 5 * time.Second
)

// Config configures a [Handler]. The zero value of every field but Bus
// means its default.
type Config struct {
	// Bus is the bus whose state is shown; required.
	Bus *event.Bus
	// Topics are listed whether or not anything subscribes to them here.
	Topics []string
	// Groups lists, per topic, consumer groups to show besides those with
	// subscribers in the Bus and those the Lister lists.
	Groups map[string][]string
	// Lister lists the topics the store holds, with their counts, and
	// the groups the charts sample, /ops/cursors shows and whose attempts
	// /ops/inflight reads; default: the
	// Bus's store, if it implements [event.Lister] (every store of this
	// module does). The status of the groups is the Bus's
	// ([event.Bus.GroupStatuses], over the Bus's store).
	Lister event.Lister
	// Prefix is the path the handler serves under (default "/ops"): the
	// dashboard at Prefix+"/", the endpoints at Prefix+"/topics" and so on.
	Prefix string
	// Verifier checks the bearer token of every JSON request (401 without
	// a valid one); the principal's policy must then allow [acl.Inspect]
	// on the topic a read names and [acl.Admin] on the topic a redrive
	// names (403). Requests about every topic (/ops/topics, /ops/inflight
	// without topic) need a principal only, and show only the topics and
	// groups it may inspect; so do the groups of a topic. nil means open
	// access. The dashboard page holds no data and is served to anyone.
	Verifier auth.Verifier
	// PeekLimit is how many dead-lettered records /ops/dlq returns when the
	// request gives no limit (default 100); MaxLimit bounds any limit
	// (default 1000).
	PeekLimit int
	MaxLimit  int
	// Schemas is the schema registry that /ops/schemas shows and registers
	// into (POST, an [acl.Admin] action on the topic); nil answers 501.
	Schemas Schemas
	// Logger receives store errors, and every admin action (with its
	// principal) at Info; nil discards them.
	Logger *slog.Logger
	// Registerer, if set, gets promlib_ops_actions_total, the admin
	// actions by action and result.
	Registerer prometheus.Registerer
	// ReadOnly turns the admin actions (redrive, purge, cursor reset,
	// group delete, schema register) off: they answer 403 read_only.
	ReadOnly bool
	// Connections lists a gateway's connections for /ops/connections;
	// nil answers 501.
	Connections ConnectionLister
	// ChartWindow is how much history of the charts the Handler keeps in
	// memory (default 15 minutes, at most 24 hours), sampled every
	// ChartInterval (default 5s) by [Handler.Run]; ChartGroups are the
	// groups whose lag it charts, as "topic/group" (default: every group).
	ChartWindow   time.Duration
	ChartInterval time.Duration
	ChartGroups   []string
	// Clock is the clock of the topics' "now", of the connections' ages
	// and of the charts' samples (nil: the system clock). lag_ms is by the
	// Bus's clock ([event.Config].Clock), as [event.Bus.GroupStatus]
	// reads it.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	if c.Bus != nil {
		if c.Lister == nil {
			c.Lister, _ = c.Bus.Store().(event.Lister)
		}
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.PeekLimit == 0 {
		c.PeekLimit = DefaultPeekLimit
	}
	if c.MaxLimit == 0 {
		c.MaxLimit = DefaultMaxLimit
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ChartWindow == 0 {
		c.ChartWindow = DefaultChartWindow
	}
	if c.ChartInterval == 0 {
		c.ChartInterval = DefaultChartInterval
	}
	c.Clock = clock.Or(c.Clock)
}

// Validate reports every problem of c, joined.
func (c *Config) Validate() error {
	var errs []error
	if c.Bus == nil {
		errs = append(errs, invalid("Bus", "nil"))
	}
	for _, t := range c.Topics {
		if err := event.ValidateTopic(t); err != nil {
			errs = append(errs, invalid("Topics", "%v", err))
		}
	}
	for t, gs := range c.Groups {
		if err := event.ValidateTopic(t); err != nil {
			errs = append(errs, invalid("Groups", "%v", err))
		}
		for _, g := range gs {
			if err := event.ValidateGroup(g); err != nil {
				errs = append(errs, invalid("Groups", "%v", err))
			}
		}
	}
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/")) {
		errs = append(errs, invalid("Prefix", "%q, want a path that starts with '/' and does not end with one", c.Prefix))
	}
	if c.PeekLimit < 0 {
		errs = append(errs, invalid("PeekLimit", "%d is negative", c.PeekLimit))
	}
	if c.ChartWindow < 0 || c.ChartWindow > 24*time.Hour {
		errs = append(errs, invalid("ChartWindow", "%v, want up to 24h", c.ChartWindow))
	}
	switch {
	case c.ChartInterval < 0:
		errs = append(errs, invalid("ChartInterval", "%v is negative", c.ChartInterval))
	case c.ChartInterval > 0 && c.ChartInterval < 10*time.Millisecond:
		errs = append(errs, invalid("ChartInterval", "%v, want at least 10ms", c.ChartInterval))
	case c.ChartInterval > 0 && c.ChartWindow > 0 && c.ChartInterval > c.ChartWindow:
		errs = append(errs, invalid("ChartInterval", "%v is longer than ChartWindow %v", c.ChartInterval, c.ChartWindow))
	case c.ChartInterval > 0 && c.ChartWindow/c.ChartInterval > maxChartPoints:
		errs = append(errs, invalid("ChartInterval", "%v gives more than %d points in ChartWindow %v", c.ChartInterval, maxChartPoints, c.ChartWindow))
	}
	for _, g := range c.ChartGroups {
		t, grp, ok := strings.Cut(g, "/")
		if !ok || event.ValidateTopic(t) != nil || event.ValidateGroup(grp) != nil {
			errs = append(errs, invalid("ChartGroups", "%q, want topic/group", g))
		}
	}
	if c.MaxLimit < 0 {
		errs = append(errs, invalid("MaxLimit", "%d is negative", c.MaxLimit))
	}
	if c.PeekLimit > 0 && c.MaxLimit > 0 && c.PeekLimit > c.MaxLimit {
		errs = append(errs, invalid("PeekLimit", "%d is more than MaxLimit %d", c.PeekLimit, c.MaxLimit))
	}
	return errors.Join(errs...)
}
