package dedupe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// Config says what [SubscribeExactlyOnce] subscribes, and [Wrap] wraps.
type Config struct {
	// Bus is the bus to subscribe to (not used by Wrap).
	Bus   *event.Bus
	Topic string
	Group string
	// Store remembers the processed ids.
	Store Store
	// Handler is the handler to run once per event id.
	Handler event.Handler
	Options Options
}

// Options are the settings of [SubscribeExactlyOnce] and
// [SubscribeExactlyOnceTx].
type Options struct {
	// TTL is how long a processed id is remembered. It must cover the
	// subscription's redelivery horizon ([event.SubscribeOptions.Horizon]);
	// default: the horizon plus one hour.
	TTL time.Duration
	// Subscribe are the subscription's options. ManualAck is not allowed:
	// the wrapper acks.
	Subscribe []event.SubscribeOption
	// PollInterval is how often a delivery whose id is busy elsewhere
	// looks again (default 20ms).
	PollInterval time.Duration
	// Clock arms the waits for a busy id and the lease renewals while the
	// handler runs; nil means the system clock. Give it the bus's clock.
	Clock clock.Clock
}

// Key returns the dedupe key of an event id in a consumer group.
func Key(topic, group, id string) string { return topic + "/" + group + "/" + id }

// SubscribeExactlyOnce subscribes cfg.Handler (h) so that its effect
// happens once per event id, however often the event is delivered:
//
//   - before h runs, the delivery claims the id in cfg.Store; two deliveries of
//     one id never run h at the same time. While h runs, the claim and the
//     delivery's lease are extended, so a slow handler is not redelivered;
//     a delivery that finds the id busy waits for the holder, extending its
//     own lease. The claim's lease (three ack timeouts) frees the id of a
//     holder in another process that died; in one process the wrappers of
//     a store also hold the id among themselves, so a holder whose renewals
//     come late (the whole process paused or starved) keeps it;
//   - an id already completed is acked without running h;
//   - when h fails, the claim is released and the redelivery runs h again;
//   - when h succeeds, the id is marked done for TTL, then acked.
//
// This is exactly-once for effects that are idempotent or that complete
// before the mark; where h's writes and the mark share a transaction, see
// [SubscribeExactlyOnceTx]. A TTL shorter than the
// redelivery horizon is refused: an id forgotten before its last
// redelivery would run twice.
func SubscribeExactlyOnce(ctx context.Context, cfg Config) (*event.Subscription, error) {
	if cfg.Bus == nil {
		return nil, invalid("Bus", "nil")
	}
	wrapped, so, err := wrap(cfg)
	if err != nil {
		return nil, err
	}
	return cfg.Bus.Subscribe(ctx, cfg.Topic, cfg.Group, wrapped, so...)
}

// Wrap returns cfg.Handler wrapped as SubscribeExactlyOnce wraps it, for a
// host that subscribes itself; subscribe it with cfg.Options.Subscribe.
// cfg.Bus is not used.
func Wrap(cfg Config) (event.Handler, error) {
	wrapped, _, err := wrap(cfg)
	return wrapped, err
}

// resolve checks opts against the subscription options they carry and
// fills the defaults; it returns the resolved subscription options too.
func (opts Options) resolve(topic string) (Options, event.SubscribeOptions, error) {
	var so event.SubscribeOptions
	for _, o := range opts.Subscribe {
		o(&so)
	}
	if so.ManualAck {
		return opts, so, invalid("Subscribe", "manual ack is not allowed: the wrapper acks")
	}
	horizon := so.Horizon()
	if opts.TTL == 0 {
		opts.TTL = horizon + time.Hour
	}
	if opts.TTL < horizon {
		return opts, so, invalid("TTL", "%v is shorter than the redelivery horizon %v (ack timeout x max attempts + backoffs)", opts.TTL, horizon)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	opts.Clock = clock.Or(opts.Clock)
	return opts, so.Resolved(topic), nil
}

func wrap(cfg Config) (event.Handler, []event.SubscribeOption, error) {
	topic, group, store, h := cfg.Topic, cfg.Group, cfg.Store, cfg.Handler
	if store == nil {
		return nil, nil, invalid("Store", "nil")
	}
	if h == nil {
		return nil, nil, invalid("Handler", "nil")
	}
	opts, so, err := cfg.Options.resolve(topic)
	if err != nil {
		return nil, nil, err
	}
	// The claim outlives the delivery's lease, so a holder whose renewal
	// comes late (a loaded machine, a slow store) keeps it; a holder that
	// died frees it after claimLease.
	lease, claimLease := so.AckTimeout, 3*so.AckTimeout
	instance := uuid.NewString()
	// Each call is an owner of its own: two deliveries may carry the same
	// attempt number (members of a group that took a partition from each
	// other, or a delivery handed back unstarted and delivered again), and
	// a shared owner would let both past the claim.
	var calls atomic.Uint64
	scope := localScope(store)
	return func(ctx context.Context, d *event.Delivery) error {
		key := Key(topic, group, d.ID)
		local := localKey{scope, key}
		owner := instance + "/" + d.ID + "/" + strconv.Itoa(d.Attempt) + "/" + strconv.FormatUint(calls.Add(1), 10)
		stop := keepAlive(ctx, opts.Clock, d, lease, nil)
		defer func() { stop() }()
		for {
			// The key is claimed in this process first (see localClaims),
			// then in the store, for the other processes.
			if localClaims.tryLock(local) {
				st, err := store.Claim(ctx, key, owner, claimLease)
				if err != nil {
					localClaims.unlock(local)
					return fmt.Errorf("dedupe: claim %q: %w", key, err)
				}
				switch st {
				case Done:
					localClaims.unlock(local)
					return nil
				case Acquired:
					defer localClaims.unlock(local) // after the release or the mark
					stop()
					stop = keepAlive(ctx, opts.Clock, d, lease, func(ctx context.Context) {
						_, _ = store.Claim(ctx, key, owner, claimLease)
					})
					err := h(ctx, d)
					stop() // no renewal may land after the release or the mark
					return settle(ctx, store, key, owner, opts.TTL, err)
				}
				localClaims.unlock(local) // another process holds it
			}
			if err := sleep(ctx, opts.Clock, opts.PollInterval); err != nil {
				return err
			}
		}
	}, opts.Subscribe, nil
}

// sleep waits d on c, or until ctx ends.
func sleep(ctx context.Context, c clock.Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// keepAlive extends d's lease (and calls extra) every lease/3 on c until
// the returned function is called.
func keepAlive(ctx context.Context, c clock.Clock, d *event.Delivery, lease time.Duration, extra func(context.Context)) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	every := max(lease/3, time.Millisecond)
	go func() {
		defer close(done)
		t := c.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				if extra != nil {
					extra(ctx)
				}
				_ = d.ModAck(ctx, lease)
				t.Reset(every)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// settle releases the claim after a failed handler, or marks the key done.
func settle(ctx context.Context, store Store, key, owner string, ttl time.Duration, herr error) error {
	if herr != nil {
		if err := store.Release(context.WithoutCancel(ctx), key, owner); err != nil {
			herr = errors.Join(herr, fmt.Errorf("dedupe: release %q: %w", key, err))
		}
		return herr
	}
	if err := store.Complete(ctx, key, owner, ttl); err != nil {
		return fmt.Errorf("dedupe: complete %q: %w", key, err)
	}
	return nil
}
