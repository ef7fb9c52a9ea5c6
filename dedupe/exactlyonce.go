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
	// Bus is the bus to subscribe to. Wrap does not subscribe, but reads
	// the group's stored settings from it when it is set.
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
	// redelivery horizon of the consumer group's settings
	// ([event.GroupConfig.Horizon]: those stored with the group, or, for
	// a group that does not exist yet, those Subscribe asks for); default:
	// the horizon plus one hour. A TTL shorter than the horizon is refused
	// when subscribing; should [event.Bus.UpdateGroup] lengthen the
	// horizon past it later, ids are remembered for the horizon instead.
	TTL time.Duration
	// Subscribe are the subscription's options. ManualAck is not allowed:
	// the wrapper acks. The group settings among them
	// ([event.SubscribeOptions].Group) are asked of the group as by
	// [event.Bus.Subscribe]: those a group is created with, and refused
	// when the group is stored with others.
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
// The ack timeout and the redelivery horizon are the group's: a group's
// delivery settings are stored with it ([event.GroupConfig]), so they are
// read from cfg.Bus before subscribing (a new group is created first,
// with the settings cfg.Options.Subscribe asks for, as Subscribe would
// create it), and read again while the subscription runs, so that an
// [event.Bus.UpdateGroup] reaches the wrapper too.
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
	if err := cfg.check(); err != nil {
		return nil, err
	}
	pol, err := subscribePolicy(ctx, cfg.Bus, cfg.Topic, cfg.Group, cfg.Options)
	if err != nil {
		return nil, err
	}
	return cfg.Bus.Subscribe(ctx, cfg.Topic, cfg.Group, wrap(cfg, pol), pol.opts.Subscribe...)
}

// Wrap returns cfg.Handler wrapped as SubscribeExactlyOnce wraps it, for a
// host that subscribes itself; subscribe it with cfg.Options.Subscribe.
// Wrap does not subscribe, and creates no group: the ack timeout and the
// redelivery horizon are those of the group's stored settings when
// cfg.Bus is set and the group exists (read again while the handler is
// used), else those cfg.Options.Subscribe asks for, with the defaults
// for the settings it does not ask for. Without cfg.Bus, ask there for
// the settings the group is stored with, or give a TTL that covers its
// horizon.
func Wrap(cfg Config) (event.Handler, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	so, err := cfg.Options.subscribeOptions()
	if err != nil {
		return nil, err
	}
	var read func(context.Context) (event.GroupConfig, error)
	group, stale := so.Group.Resolved(cfg.Topic), false
	if cfg.Bus != nil {
		read = func(ctx context.Context) (event.GroupConfig, error) {
			return cfg.Bus.GroupConfig(ctx, cfg.Topic, cfg.Group)
		}
		stored, err := read(context.Background())
		switch {
		case err == nil:
			group = stored
		case errors.Is(err, event.ErrNotFound):
			// The host's Subscribe creates it: the first delivery reads
			// what it was created with.
			stale = true
		default:
			return nil, err
		}
	}
	pol, err := newPolicy(cfg.Topic, cfg.Options, group, read)
	if err != nil {
		return nil, err
	}
	if stale {
		pol.expire()
	}
	return wrap(cfg, pol), nil
}

// check reports a missing Store or Handler.
func (cfg *Config) check() error {
	if cfg.Store == nil {
		return invalid("Store", "nil")
	}
	if cfg.Handler == nil {
		return invalid("Handler", "nil")
	}
	return nil
}

// subscribeOptions applies opts.Subscribe and refuses manual ack.
func (opts Options) subscribeOptions() (event.SubscribeOptions, error) {
	var so event.SubscribeOptions
	for _, o := range opts.Subscribe {
		o(&so)
	}
	if so.ManualAck {
		return so, invalid("Subscribe", "manual ack is not allowed: the wrapper acks")
	}
	return so, nil
}

// groupRefresh is how often a wrapper with a Bus reads its group's
// settings again, so that an UpdateGroup reaches it.
const groupRefresh = 10 * time.Second

// policy is what a wrapper takes from its group's settings: the lease of
// a delivery (the group's AckTimeout) and how long a done mark is kept.
// With a Bus it reads them again every groupRefresh, on the first
// delivery after that.
type policy struct {
	topic string
	opts  Options // defaults filled, TTL as given (0: the horizon plus one hour)
	read  func(context.Context) (event.GroupConfig, error)
	cur   atomic.Pointer[policyNow]
	mu    sync.Mutex // one reader at a time
}

// policyNow is a policy's view of the group's settings at one time.
type policyNow struct {
	lease, ttl time.Duration
	at         time.Time // when read
}

// subscribePolicy returns the policy of a subscription of group on topic
// with opts: from the group's stored settings, created (as Subscribe
// would) from those opts ask for if the group has none. A TTL shorter
// than a new group's horizon is refused before the group is created.
func subscribePolicy(ctx context.Context, bus *event.Bus, topic, group string, opts Options) (*policy, error) {
	so, err := opts.subscribeOptions()
	if err != nil {
		return nil, err
	}
	if err := so.Validate(); err != nil {
		return nil, err // before any group is created
	}
	if _, err := bus.GroupConfig(ctx, topic, group); errors.Is(err, event.ErrNotFound) {
		if _, err := newPolicy(topic, opts, so.Group.Resolved(topic), nil); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	// The stored settings, or those the group is created with now; a
	// group stored with others than asked is refused here, as Subscribe
	// would refuse it (an *event.GroupConfigError).
	stored, err := bus.CreateGroup(ctx, topic, group, so.Group)
	if err != nil {
		return nil, err
	}
	return newPolicy(topic, opts, stored, func(ctx context.Context) (event.GroupConfig, error) {
		return bus.GroupConfig(ctx, topic, group)
	})
}

// newPolicy fills opts' defaults and checks its TTL against the horizon
// of group, the group's settings; read, when not nil, reads them again.
func newPolicy(topic string, opts Options, group event.GroupConfig, read func(context.Context) (event.GroupConfig, error)) (*policy, error) {
	if h := group.Horizon(); opts.TTL != 0 && opts.TTL < h {
		return nil, invalid("TTL", "%v is shorter than the group's redelivery horizon %v (ack timeout x max attempts + backoffs)", opts.TTL, h)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	opts.Clock = clock.Or(opts.Clock)
	p := &policy{topic: topic, opts: opts, read: read}
	p.cur.Store(p.of(group, opts.Clock.Now()))
	return p, nil
}

// of returns the policy of the group settings g read at t. A TTL given
// shorter than g's horizon (the group was updated since it was checked)
// is lengthened to it: an id forgotten before its last redelivery would
// run twice.
func (p *policy) of(g event.GroupConfig, t time.Time) *policyNow {
	h := g.Horizon()
	ttl := p.opts.TTL
	if ttl == 0 {
		ttl = h + time.Hour
	}
	return &policyNow{lease: g.Resolved(p.topic).AckTimeout, ttl: max(ttl, h), at: t}
}

// expire makes the next delivery read the group's settings.
func (p *policy) expire() {
	cur := *p.cur.Load()
	cur.at = time.Time{}
	p.cur.Store(&cur)
}

// now returns the policy, reading the group's settings again when the
// last read is groupRefresh old; a failed read keeps the last one.
func (p *policy) now(ctx context.Context) *policyNow {
	cur := p.cur.Load()
	if p.read == nil || p.opts.Clock.Now().Sub(cur.at) < groupRefresh || !p.mu.TryLock() {
		return cur
	}
	defer p.mu.Unlock()
	t := p.opts.Clock.Now()
	next := &policyNow{lease: cur.lease, ttl: cur.ttl, at: t}
	if g, err := p.read(ctx); err == nil {
		next = p.of(g, t)
	}
	p.cur.Store(next)
	return next
}

func wrap(cfg Config, pol *policy) event.Handler {
	topic, group, store, h := cfg.Topic, cfg.Group, cfg.Store, cfg.Handler
	opts := pol.opts
	instance := uuid.NewString()
	// Each call is an owner of its own: two deliveries may carry the same
	// attempt number (members of a group that took a partition from each
	// other, or a delivery handed back unstarted and delivered again), and
	// a shared owner would let both past the claim.
	var calls atomic.Uint64
	scope := localScope(store)
	return func(ctx context.Context, d *event.Delivery) error {
		// The claim outlives the delivery's lease, so a holder whose
		// renewal comes late (a loaded machine, a slow store) keeps it; a
		// holder that died frees it after claimLease.
		pn := pol.now(ctx)
		lease, claimLease := pn.lease, 3*pn.lease
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
					return settle(ctx, store, key, owner, pn.ttl, err)
				}
				localClaims.unlock(local) // another process holds it
			}
			if err := sleep(ctx, opts.Clock, opts.PollInterval); err != nil {
				return err
			}
		}
	}
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
