package metrics

import (
	"errors"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/promethean/promlib/clock"
)

// Namespace prefixes every metric name.
const Namespace = "promlib"

// Defaults of [Config].
const (
	DefaultMaxTopics     = 1000
	DefaultMaxGroups     = 1000
	DefaultScrapeTimeout = 5 * time.Second
	// DefaultGroupsInterval is how long [Bus.Watch] serves the store's
	// groups as last read before it reads them again.
	DefaultGroupsInterval = 15 * time.Second
)

// Default histogram buckets, in seconds.
var (
	// DefaultLatencyBuckets suit end-to-end latencies (publish to ack, outbox
	// add to sent): 5ms to 5 minutes.
	DefaultLatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	// DefaultDurationBuckets suit the time one step takes (a handler call, a
	// gateway frame): 100µs to 30s.
	DefaultDurationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	// DefaultConnectionBuckets suit how long a WebSocket connection lasts:
	// 1s to a day.
	DefaultConnectionBuckets = []float64{1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}
)

// Config configures the metrics of [NewBusObserver], [NewGatewayObserver]
// and [NewOutboxObserver].
// The zero value of every field means its default.
type Config struct {
	// Registerer receives the collectors; nil means no metrics (the
	// observers then do nothing). Never the global registry unless the
	// caller passes it.
	Registerer prometheus.Registerer
	// MaxTopics bounds the distinct values of the topic label, and
	// MaxGroups those of the group label, per constructed value (defaults
	// 1000). Topics and groups beyond them are counted under the label
	// value [OtherLabel].
	MaxTopics int
	MaxGroups int
	// LatencyBuckets, DurationBuckets and ConnectionBuckets are the
	// histograms' buckets, in seconds (defaults [DefaultLatencyBuckets],
	// [DefaultDurationBuckets], [DefaultConnectionBuckets]).
	LatencyBuckets    []float64
	DurationBuckets   []float64
	ConnectionBuckets []float64
	// ScrapeTimeout bounds the store reads of a scrape (the groups of
	// [Bus.Watch], outbox rows; default 5s).
	ScrapeTimeout time.Duration
	// GroupsInterval is how often [Bus.Watch] reads the status of every
	// group the store holds (lag, committed cursor, members, dead
	// letters): at most once per interval, at the first scrape after it
	// has passed, serving the values last read in between (default 15s).
	GroupsInterval time.Duration
	// Clock tells the time of GroupsInterval; nil means the system clock.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	if c.MaxTopics == 0 {
		c.MaxTopics = DefaultMaxTopics
	}
	if c.MaxGroups == 0 {
		c.MaxGroups = DefaultMaxGroups
	}
	if c.LatencyBuckets == nil {
		c.LatencyBuckets = DefaultLatencyBuckets
	}
	if c.DurationBuckets == nil {
		c.DurationBuckets = DefaultDurationBuckets
	}
	if c.ConnectionBuckets == nil {
		c.ConnectionBuckets = DefaultConnectionBuckets
	}
	c.LatencyBuckets = slices.Clone(c.LatencyBuckets)
	c.DurationBuckets = slices.Clone(c.DurationBuckets)
	c.ConnectionBuckets = slices.Clone(c.ConnectionBuckets)
	if c.ScrapeTimeout == 0 {
		c.ScrapeTimeout = DefaultScrapeTimeout
	}
	if c.GroupsInterval == 0 {
		c.GroupsInterval = DefaultGroupsInterval
	}
	c.Clock = clock.Or(c.Clock)
}

// Validate reports every problem of c, joined.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxTopics < 0 {
		errs = append(errs, invalid("MaxTopics", "%d is negative", c.MaxTopics))
	}
	if c.MaxGroups < 0 {
		errs = append(errs, invalid("MaxGroups", "%d is negative", c.MaxGroups))
	}
	for _, b := range []struct {
		name string
		v    []float64
	}{{"LatencyBuckets", c.LatencyBuckets}, {"DurationBuckets", c.DurationBuckets}, {"ConnectionBuckets", c.ConnectionBuckets}} {
		if b.v != nil && (len(b.v) == 0 || !slices.IsSorted(b.v) || len(slices.Compact(slices.Clone(b.v))) != len(b.v)) {
			errs = append(errs, invalid(b.name, "%v, want increasing bounds", b.v))
		}
	}
	if c.ScrapeTimeout < 0 {
		errs = append(errs, invalid("ScrapeTimeout", "%v is negative", c.ScrapeTimeout))
	}
	if c.GroupsInterval < 0 {
		errs = append(errs, invalid("GroupsInterval", "%v is negative", c.GroupsInterval))
	}
	return errors.Join(errs...)
}

// prepare copies c with its defaults and validates it.
func prepare(c Config) (Config, error) {
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	c.setDefaults()
	return c, nil
}
