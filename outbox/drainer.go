package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/backoff"
)

// Observer receives the drainer's events for metrics; keep it cheap.
type Observer interface {
	// Sent is called for each row published and marked sent; age is the
	// time since it was added.
	Sent(topic string, age time.Duration)
	// Retried is called for each failed attempt that will be retried.
	Retried(topic string)
	// Failed is called for each row that failed for good.
	Failed(topic string)
}

type nopObserver struct{}

func (nopObserver) Sent(string, time.Duration) {}
func (nopObserver) Retried(string)             {}
func (nopObserver) Failed(string)              {}

// Notifier is implemented by stores that can tell a drainer in the same
// process that rows were added.
type Notifier interface {
	Watch() (<-chan struct{}, func())
}

// Defaults of [Config].
const (
	DefaultBatchSize    = 256
	DefaultLeaseTTL     = 10 * time.Second
	DefaultPollInterval = 250 * time.Millisecond
	DefaultMaxAttempts  = 10
	DefaultBackoff      = 200 * time.Millisecond
	DefaultMaxBackoff   = time.Minute
	// DefaultRetention is how long sent rows are kept.
	DefaultRetention         = 7 * 24 * time.Hour
	DefaultRetentionInterval = time.Minute
	DefaultRetentionBatch    = 1000
)

// retentionBatches is how many batches one retention round deletes at
// most before the drainer goes back to publishing; the next round comes
// at once when there was more.
const retentionBatches = 10

// Config configures a [Drainer]. Zero values mean the defaults.
type Config struct {
	Store Store
	Bus   *event.Bus
	// Worker names this drainer in the lease (default: a new UUID).
	Worker string
	// BatchSize is how many rows one claim takes (default 256).
	BatchSize int
	// LeaseTTL is how long the lease lasts without renewal (default 10s);
	// the drainer renews it before every claim.
	LeaseTTL time.Duration
	// PollInterval is how often an idle drainer looks for rows added by
	// other processes or in transactions (default 250ms).
	PollInterval time.Duration
	// MaxAttempts is how many publish attempts a row gets before it is
	// marked failed (default 10).
	MaxAttempts int
	// Backoff is the delay after the first failed attempt; it doubles up
	// to MaxBackoff (defaults 200ms and 1m).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Retention is how long sent rows are kept (default 7 days; negative
	// keeps them for ever). The leading drainer deletes older ones every
	// RetentionInterval (default 1m), RetentionBatch rows (default 1000)
	// per store call. Pending and failed rows are never deleted.
	Retention         time.Duration
	RetentionInterval time.Duration
	RetentionBatch    int
	Logger            *slog.Logger
	Observer          Observer
	// Clock tells the time of polls, retries and row ages; nil means the
	// system clock. The store's leases follow the store's own clock.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	if c.Worker == "" {
		c.Worker = "drainer-" + uuid.NewString()
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = DefaultRetentionInterval
	}
	if c.RetentionBatch == 0 {
		c.RetentionBatch = DefaultRetentionBatch
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	c.Clock = clock.Or(c.Clock)
}

// Validate reports every problem of c, joined.
func (c *Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, invalid("Store", "nil"))
	}
	if c.Bus == nil {
		errs = append(errs, invalid("Bus", "nil"))
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"BatchSize", c.BatchSize < 0}, {"LeaseTTL", c.LeaseTTL < 0}, {"PollInterval", c.PollInterval < 0},
		{"MaxAttempts", c.MaxAttempts < 0}, {"Backoff", c.Backoff < 0}, {"MaxBackoff", c.MaxBackoff < 0},
		{"RetentionInterval", c.RetentionInterval < 0}, {"RetentionBatch", c.RetentionBatch < 0},
	} {
		if f.bad {
			errs = append(errs, invalid(f.name, "negative"))
		}
	}
	return errors.Join(errs...)
}

// Drainer publishes outbox rows to the bus. Drainers of one outbox elect a
// leader through the store's lease; the others stand by and take over
// when its lease expires. Each row is published with the row's id as the
// event id, so a row published again after a crash (before it was marked
// sent) is not published twice.
type Drainer struct {
	cfg  Config
	wake chan struct{}
}

// NewDrainer returns a drainer; start it with Run.
func NewDrainer(cfg Config) (*Drainer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Drainer{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Notify wakes the drainer at once, e.g. after a transaction that added
// rows committed.
func (d *Drainer) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run drains until ctx ends, then releases the lease. It returns nil when
// ctx ended; other errors are logged and retried.
func (d *Drainer) Run(ctx context.Context) error {
	c := &d.cfg
	var watch <-chan struct{}
	if n, ok := c.Store.(Notifier); ok {
		ch, stop := n.Watch()
		defer stop()
		watch = ch
	}
	var token int64
	defer func() {
		if token != 0 {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = c.Store.ReleaseLease(rctx, c.Worker, token)
		}
	}()
	timer := c.Clock.NewTimer(0)
	defer timer.Stop()
	var nextRetention time.Time // the first round leads with one
	for {
		wait := c.PollInterval
		t, ok, err := c.Store.AcquireLease(ctx, c.Worker, c.LeaseTTL)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			c.Logger.Warn("outbox: lease failed", "worker", c.Worker, "err", err)
		case !ok:
			token = 0
			wait = c.LeaseTTL / 3
		default:
			if t != token {
				c.Logger.Info("outbox: drainer leads", "worker", c.Worker, "token", t)
			}
			token = t
			n, err := d.drainOnce(ctx, token)
			if err != nil && ctx.Err() == nil {
				c.Logger.Warn("outbox: drain failed", "worker", c.Worker, "err", err)
			}
			if n == c.BatchSize && err == nil {
				wait = 0 // more may be waiting
			}
			if c.Retention > 0 && !c.Clock.Now().Before(nextRetention) {
				more, err := d.deleteSent(ctx)
				if err != nil && ctx.Err() == nil {
					c.Logger.Warn("outbox: deleting sent rows failed", "worker", c.Worker, "err", err)
				}
				nextRetention = c.Clock.Now().Add(c.RetentionInterval)
				if more {
					nextRetention, wait = time.Time{}, 0
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
		case <-d.wake:
		case <-watch:
		}
	}
}

// deleteSent deletes rows sent longer than Retention ago, up to
// retentionBatches batches; it reports whether more may be left.
func (d *Drainer) deleteSent(ctx context.Context) (more bool, err error) {
	c := &d.cfg
	before := c.Clock.Now().Add(-c.Retention)
	total := 0
	defer func() {
		if total > 0 {
			c.Logger.Debug("outbox: deleted sent rows", "worker", c.Worker, "n", total)
		}
	}()
	for range retentionBatches {
		n, err := c.Store.DeleteSent(ctx, before, c.RetentionBatch)
		total += n
		if err != nil {
			return false, fmt.Errorf("delete sent: %w", err)
		}
		if n < c.RetentionBatch {
			return false, nil
		}
	}
	return true, nil
}

// drainOnce claims one batch and publishes it, in order per ordering key.
// It returns how many rows it claimed.
func (d *Drainer) drainOnce(ctx context.Context, token int64) (int, error) {
	c := &d.cfg
	rows, err := c.Store.Claim(ctx, token, c.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("claim: %w", err)
	}
	blocked := make(map[string]bool)
	var sent []Row
	// Rows of one topic are published together, in order; on an error they
	// are retried one by one so that one bad row holds back only its key.
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Topic == rows[start].Topic {
			end++
		}
		ok, err := d.publish(ctx, token, rows[start:end], blocked)
		if err != nil {
			return len(rows), err
		}
		sent = append(sent, ok...)
		start = end
	}
	if len(sent) == 0 {
		return len(rows), nil
	}
	ids := make([]string, len(sent))
	for i := range sent {
		ids[i] = sent[i].ID
	}
	if err := c.Store.MarkSent(ctx, token, ids...); err != nil {
		return len(rows), fmt.Errorf("mark sent: %w", err)
	}
	now := c.Clock.Now()
	for i := range sent {
		c.Observer.Sent(sent[i].Topic, now.Sub(time.UnixMilli(sent[i].TS)))
	}
	return len(rows), nil
}

// publish publishes rows of one topic and returns those that were
// published. A row that fails is retried later and blocks the rows of its
// ordering key behind it.
func (d *Drainer) publish(ctx context.Context, token int64, rows []Row, blocked map[string]bool) ([]Row, error) {
	recs := make([]event.Record, 0, len(rows))
	ok := make([]Row, 0, len(rows))
	for _, r := range rows {
		if blocked[r.OrderingKey()] {
			continue
		}
		rec, err := d.record(&r)
		if err != nil {
			if err := d.retry(ctx, token, &r, err, blocked); err != nil {
				return nil, err
			}
			continue
		}
		recs = append(recs, rec)
		ok = append(ok, r)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	if len(recs) > 1 {
		if _, err := d.cfg.Bus.Append(ctx, recs[0].Topic, recs); err == nil {
			return ok, nil
		}
	}
	// One by one, so that a failing row fails alone.
	var out []Row
	for i := range ok {
		r := &ok[i]
		if blocked[r.OrderingKey()] {
			continue
		}
		if _, err := d.cfg.Bus.Append(ctx, recs[i].Topic, recs[i:i+1]); err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			if err := d.retry(ctx, token, r, err, blocked); err != nil {
				return out, err
			}
			continue
		}
		out = append(out, *r)
	}
	return out, nil
}

func (d *Drainer) record(r *Row) (event.Record, error) {
	return d.cfg.Bus.NewRecord(r.Topic, r.Payload, event.PublishOptions{
		ID: r.ID, Key: r.Key, Headers: r.Headers,
	})
}

// retry records a failed attempt: the row waits for its backoff, or fails
// for good after MaxAttempts. Either way its key is held for this batch.
func (d *Drainer) retry(ctx context.Context, token int64, r *Row, cause error, blocked map[string]bool) error {
	c := &d.cfg
	blocked[r.OrderingKey()] = true
	attempts := r.Attempts + 1
	final := attempts >= c.MaxAttempts
	delay := backoff.Policy{Initial: c.Backoff, Max: c.MaxBackoff}.Delay(attempts)
	if err := c.Store.MarkRetry(ctx, token, Retry{ID: r.ID, Err: cause.Error(), Next: c.Clock.Now().Add(delay), Final: final}); err != nil {
		return fmt.Errorf("mark retry: %w", err)
	}
	if final {
		c.Logger.Warn("outbox: row failed", "id", r.ID, "topic", r.Topic, "attempts", attempts, "err", cause)
		c.Observer.Failed(r.Topic)
	} else {
		c.Observer.Retried(r.Topic)
	}
	return nil
}
