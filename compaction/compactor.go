package compaction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// Policy says how one topic is kept.
type TopicPolicy struct {
	Topic string
	// Compacted topics keep the latest record of each key; their
	// superseded records older than MinAge are pruned (0: never).
	Compacted bool
	MinAge    time.Duration
	// SnapshotTopic, for a compacted topic, receives a snapshot of each key
	// that changed since the previous run (empty: no snapshots). It is
	// compacted with the same MinAge.
	SnapshotTopic string
	// Retention, for a raw topic, is how long records are kept (0: for
	// ever). A consumer that falls behind it is told (see package event).
	Retention time.Duration
}

// Snapshot headers.
const (
	HeaderSnapshotOf  = "x-snapshot-of"
	HeaderSnapshotSeq = "x-snapshot-seq"
	HeaderSnapshotTS  = "x-snapshot-ts"
)

// Defaults of [Config].
const (
	DefaultInterval = 30 * time.Second
	DefaultGroup    = "compactor"
)

// Config configures a [Compactor]. Zero values mean the defaults.
type Config struct {
	Bus      *event.Bus
	Policies []TopicPolicy
	// Interval is how often snapshots are published and topics pruned
	// (default 30s).
	Interval time.Duration
	// Group is the consumer group that tracks changed keys (default
	// "compactor"); its cursor makes snapshots survive restarts.
	Group  string
	Logger *slog.Logger
	// Clock tells the time of the runs and of the ages that pruning
	// compares (default: the Bus's clock).
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil && c.Bus != nil {
		c.Clock = c.Bus.Clock()
	}
}

// Validate reports every problem of c, joined.
func (c *Config) Validate() error {
	var errs []error
	if c.Bus == nil {
		errs = append(errs, invalid("Bus", "nil"))
	}
	if c.Interval < 0 {
		errs = append(errs, invalid("Interval", "%v is negative", c.Interval))
	}
	if c.Group != "" {
		if err := event.ValidateGroup(c.Group); err != nil {
			errs = append(errs, err)
		}
	}
	for i, p := range c.Policies {
		field := "Policies[" + strconv.Itoa(i) + "]"
		if err := event.ValidateTopic(p.Topic); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
		if p.MinAge < 0 || p.Retention < 0 {
			errs = append(errs, invalid(field, "negative MinAge or Retention"))
		}
		if p.Compacted && p.Retention > 0 {
			errs = append(errs, invalid(field, "a compacted topic keeps its latest records: set MinAge, not Retention"))
		}
		if !p.Compacted && (p.SnapshotTopic != "" || p.MinAge > 0) {
			errs = append(errs, invalid(field, "SnapshotTopic and MinAge need Compacted"))
		}
		if p.SnapshotTopic != "" {
			if err := event.ValidateTopic(p.SnapshotTopic); err != nil {
				errs = append(errs, fmt.Errorf("%s.SnapshotTopic: %w", field, err))
			}
		}
	}
	if c.Bus != nil {
		store := c.Bus.Store()
		for i, p := range c.Policies {
			if _, ok := store.(event.KeyStore); p.SnapshotTopic != "" && !ok {
				errs = append(errs, fmt.Errorf("%w: Policies[%d]: snapshots need latest-by-key", ErrNotSupported, i))
			}
			if _, ok := store.(event.Pruner); (p.MinAge > 0 || p.Retention > 0) && !ok {
				errs = append(errs, fmt.Errorf("%w: Policies[%d]: pruning needs a Pruner", ErrNotSupported, i))
			}
		}
	}
	return errors.Join(errs...)
}

// Report says what one run did.
type Report struct {
	Snapshots int // snapshot records published
	Pruned    int // records deleted
}

// Compactor publishes snapshots of compacted topics and prunes topics by
// their policies.
type Compactor struct {
	cfg Config

	mu      sync.Mutex
	pending map[string]*changes // by source topic
}

// changes are the keys of a topic that changed since the last snapshot,
// with the deliveries that told of them (acked once the snapshot is out).
type changes struct {
	keys       map[string]bool
	deliveries []*event.Delivery
}

// NewCompactor returns a compactor for cfg, or the problems of cfg
// (Config.Validate); start it with Run.
func NewCompactor(cfg Config) (*Compactor, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Compactor{cfg: cfg, pending: make(map[string]*changes)}, nil
}

// Run tracks changed keys, and every Interval publishes snapshots and
// prunes, until ctx ends. It returns nil then.
func (c *Compactor) Run(ctx context.Context) error {
	var subs []*event.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Close()
		}
	}()
	for _, p := range c.cfg.Policies {
		if p.SnapshotTopic == "" {
			continue
		}
		s, err := c.track(ctx, p.Topic)
		if err != nil {
			return err
		}
		subs = append(subs, s)
	}
	t := c.cfg.Clock.NewTimer(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if _, err := c.RunOnce(ctx); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("compaction: run failed", "err", err)
			}
			t.Reset(c.cfg.Interval)
		}
	}
}

// track subscribes to topic and remembers which keys change. Deliveries
// are settled once their key's snapshot is published, so a crash before it
// loses no change.
func (c *Compactor) track(ctx context.Context, topic string) (*event.Subscription, error) {
	return c.cfg.Bus.Subscribe(ctx, topic, c.cfg.Group, func(ctx context.Context, d *event.Delivery) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		ch := c.pending[topic]
		if ch == nil {
			ch = &changes{keys: make(map[string]bool)}
			c.pending[topic] = ch
		}
		if d.Key != "" {
			ch.keys[d.Key] = true
		}
		ch.deliveries = append(ch.deliveries, d)
		return nil
	}, event.FromEarliest(), event.WithManualAck(), event.WithMaxInFlight(100_000),
		event.WithAckTimeout(max(3*c.cfg.Interval, time.Minute)))
}

// Pending returns how many changes (deliveries of the tracked topics)
// wait for the next snapshot.
func (c *Compactor) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ch := range c.pending {
		n += len(ch.deliveries)
	}
	return n
}

var snapshotNS = uuid.MustParse("2f0f3a43-6b3a-4e6a-9d63-6f1f3c0f5e21")

// RunOnce publishes the snapshots of the keys that changed since the last
// run and prunes every topic by its policy.
func (c *Compactor) RunOnce(ctx context.Context) (Report, error) {
	var rep Report
	var errs []error
	for _, p := range c.cfg.Policies {
		if p.SnapshotTopic != "" {
			n, err := c.snapshot(ctx, p)
			rep.Snapshots += n
			if err != nil {
				errs = append(errs, err)
			}
		}
		n, err := c.prune(ctx, p)
		rep.Pruned += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

func (c *Compactor) snapshot(ctx context.Context, p TopicPolicy) (int, error) {
	c.mu.Lock()
	ch := c.pending[p.Topic]
	delete(c.pending, p.Topic)
	c.mu.Unlock()
	if ch == nil {
		return 0, nil
	}
	keys := make([]string, 0, len(ch.keys))
	for k := range ch.keys {
		keys = append(keys, k)
	}
	n, err := c.publishSnapshots(ctx, p, keys)
	if err != nil {
		// Keep the changes for the next run; the deliveries stay leased.
		c.mu.Lock()
		if cur := c.pending[p.Topic]; cur != nil {
			for k := range cur.keys {
				ch.keys[k] = true
			}
			ch.deliveries = append(ch.deliveries, cur.deliveries...)
		}
		c.pending[p.Topic] = ch
		c.mu.Unlock()
		return n, err
	}
	for _, d := range ch.deliveries {
		_ = d.Ack(ctx) // a lapsed lease is redelivered: the key is snapshotted again, harmlessly
	}
	return n, nil
}

func (c *Compactor) publishSnapshots(ctx context.Context, p TopicPolicy, keys []string) (int, error) {
	ks := c.cfg.Bus.Store().(event.KeyStore)
	n := 0
	for start := 0; start < len(keys); start += 500 {
		batch := keys[start:min(start+500, len(keys))]
		latest, err := ks.LatestByKey(ctx, p.Topic, batch)
		if err != nil {
			return n, fmt.Errorf("compaction: latest of %q: %w", p.Topic, err)
		}
		recs := make([]event.Record, 0, len(latest))
		for _, k := range batch {
			r, ok := latest[k]
			if !ok {
				continue // deleted since
			}
			seq := strconv.FormatUint(r.Seq, 10)
			rec, err := c.cfg.Bus.NewRecord(p.SnapshotTopic, r.Payload, event.PublishOptions{
				// The same source record always makes the same snapshot id,
				// so a run repeated after a crash publishes nothing twice.
				ID:  uuid.NewSHA1(snapshotNS, []byte(p.SnapshotTopic+"\x00"+p.Topic+"\x00"+seq)).String(),
				Key: k,
				Headers: map[string]string{
					HeaderSnapshotOf: p.Topic, HeaderSnapshotSeq: seq, HeaderSnapshotTS: strconv.FormatInt(r.TS, 10),
				},
			})
			if err != nil {
				return n, err
			}
			recs = append(recs, rec)
		}
		if len(recs) == 0 {
			continue
		}
		if _, err := c.cfg.Bus.Append(ctx, p.SnapshotTopic, recs); err != nil {
			return n, fmt.Errorf("compaction: publish snapshots of %q: %w", p.Topic, err)
		}
		n += len(recs)
	}
	return n, nil
}

func (c *Compactor) prune(ctx context.Context, p TopicPolicy) (int, error) {
	pr, ok := c.cfg.Bus.Store().(event.Pruner)
	if !ok {
		return 0, nil
	}
	now := c.cfg.Clock.Now()
	total := 0
	do := func(topic string, age time.Duration, keepLatest bool) error {
		if age <= 0 {
			return nil
		}
		n, err := pr.Prune(ctx, topic, now.Add(-age).UnixMilli(), keepLatest)
		total += n
		if err != nil {
			return fmt.Errorf("compaction: prune %q: %w", topic, err)
		}
		return nil
	}
	if p.Compacted {
		if err := do(p.Topic, p.MinAge, true); err != nil {
			return total, err
		}
		if p.SnapshotTopic != "" {
			if err := do(p.SnapshotTopic, p.MinAge, true); err != nil {
				return total, err
			}
		}
		return total, nil
	}
	return total, do(p.Topic, p.Retention, false)
}
