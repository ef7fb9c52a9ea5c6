package projector

import (
	"context"
	"encoding/json"
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

var (
	// ErrInvalid is wrapped by errors about bad arguments; the message
	// names the field.
	ErrInvalid = errors.New("projector: invalid argument")
	// ErrNotSupported is returned when the store cannot give back the
	// output topic's latest state (it is not an event.KeyStore).
	ErrNotSupported = errors.New("projector: store has no latest-by-key")
)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// HeaderInputSeq, on an output record, is the seq of the input record
// whose reduction it holds.
const HeaderInputSeq = "x-projector-input-seq"

// Config configures a [Projector] from In records on the input topic to
// State records, keyed, on the output topic.
type Config[In, State any] struct {
	Bus    *event.Bus
	Input  string
	Output string
	// Group is the projector's consumer group on Input (default
	// "projector:<Output>"); its cursor is where a restart resumes.
	Group string
	// Key returns the key of the state an input record updates.
	Key func(r *event.Record, in In) (string, error)
	// Reduce returns the new state of key; ok says whether prev exists.
	Reduce func(key string, prev State, ok bool, in In, r *event.Record) (State, error)
	// Stale, when set, is asked every StaleCheck about each key; when it
	// returns true, the state it returns is published (the seed's
	// alive -> stale).
	Stale      func(key string, s State, now time.Time) (State, bool)
	StaleCheck time.Duration
	Logger     *slog.Logger
	// Clock tells the time of the staleness checks (default: the Bus's
	// clock).
	Clock clock.Clock
}

func (c *Config[In, State]) setDefaults() {
	if c.Group == "" {
		c.Group = "projector:" + c.Output
	}
	if c.StaleCheck == 0 {
		c.StaleCheck = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil && c.Bus != nil {
		c.Clock = c.Bus.Clock()
	}
}

// Validate reports every problem of c, joined.
func (c *Config[In, State]) Validate() error {
	var errs []error
	if c.Bus == nil {
		errs = append(errs, invalid("Bus", "nil"))
	} else if _, ok := c.Bus.Store().(event.KeyStore); !ok {
		errs = append(errs, ErrNotSupported)
	}
	if err := event.ValidateTopic(c.Input); err != nil {
		errs = append(errs, fmt.Errorf("projector: Input: %w", err))
	}
	if err := event.ValidateTopic(c.Output); err != nil {
		errs = append(errs, fmt.Errorf("projector: Output: %w", err))
	}
	if c.Input != "" && c.Input == c.Output {
		errs = append(errs, invalid("Output", "must differ from Input"))
	}
	if c.Group != "" {
		if err := event.ValidateGroup(c.Group); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Key == nil {
		errs = append(errs, invalid("Key", "nil"))
	}
	if c.Reduce == nil {
		errs = append(errs, invalid("Reduce", "nil"))
	}
	if c.StaleCheck < 0 {
		errs = append(errs, invalid("StaleCheck", "%v is negative", c.StaleCheck))
	}
	return errors.Join(errs...)
}

// Projector folds an input topic into keyed state, publishes each new
// state to the output topic (a compacted topic: its latest record per key
// is the state), and restarts from its group's cursor with the state
// read back from the output topic.
//
// Input records are handled one at a time, in order. Each output record
// carries the input seq it reflects ([HeaderInputSeq]) and an id derived
// from it, so an input redelivered after a crash is recognised and not
// reduced twice, and its output is not stored twice.
type Projector[In, State any] struct {
	cfg Config[In, State]

	// pub orders the publishes of new states: a staleness change is
	// computed and published under it, so it never overtakes a newer
	// reduction of its key.
	pub sync.Mutex

	mu      sync.Mutex
	state   map[string]State
	inputAt map[string]uint64 // key -> input seq its state reflects
}

// NewProjector returns a projector for cfg, or the problems of cfg
// (Config.Validate); start it with Run.
func NewProjector[In, State any](cfg Config[In, State]) (*Projector[In, State], error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Projector[In, State]{cfg: cfg, state: make(map[string]State), inputAt: make(map[string]uint64)}, nil
}

// State returns the current state of key.
func (p *Projector[In, State]) State(key string) (State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.state[key]
	return s, ok
}

// Keys returns the number of keys with a state.
func (p *Projector[In, State]) Keys() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.state)
}

// Run loads the state from the output topic, then projects until ctx
// ends, and returns nil then.
func (p *Projector[In, State]) Run(ctx context.Context) error {
	if err := p.load(ctx); err != nil {
		return err
	}
	sub, err := p.cfg.Bus.Subscribe(ctx, p.cfg.Input, p.cfg.Group, p.handle,
		event.FromEarliest(), event.WithMaxInFlight(1))
	if err != nil {
		return err
	}
	defer sub.Close()
	var tick <-chan time.Time
	var t clock.Timer
	if p.cfg.Stale != nil {
		t = p.cfg.Clock.NewTimer(p.cfg.StaleCheck)
		defer t.Stop()
		tick = t.C()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if err := p.checkStale(ctx, p.cfg.Clock.Now()); err != nil && ctx.Err() == nil {
				p.cfg.Logger.Warn("projector: staleness check failed", "output", p.cfg.Output, "err", err)
			}
			t.Reset(p.cfg.StaleCheck)
		}
	}
}

// load reads the latest state of every key back from the output topic.
func (p *Projector[In, State]) load(ctx context.Context) error {
	ks := p.cfg.Bus.Store().(event.KeyStore)
	after := ""
	for {
		page, err := ks.Latest(ctx, p.cfg.Output, after, 500)
		if err != nil {
			return fmt.Errorf("projector: load %q: %w", p.cfg.Output, err)
		}
		if len(page) == 0 {
			return nil
		}
		p.mu.Lock()
		for i := range page {
			r := &page[i]
			after = r.Key
			s, err := event.Decode[State](r)
			if err != nil {
				p.mu.Unlock()
				return fmt.Errorf("projector: load %q: %w", p.cfg.Output, err)
			}
			p.state[r.Key] = s
			p.inputAt[r.Key], _ = strconv.ParseUint(r.Headers[HeaderInputSeq], 10, 64)
		}
		p.mu.Unlock()
	}
}

var outputNS = uuid.MustParse("5b0e5d0c-2c83-4d44-8a51-7f7c1d1f0b77")

func (p *Projector[In, State]) handle(ctx context.Context, d *event.Delivery) error {
	in, err := event.Decode[In](&d.Record)
	if err != nil {
		return d.DeadLetter(ctx, err.Error()) // no retry can decode it
	}
	key, err := p.cfg.Key(&d.Record, in)
	if err != nil {
		return d.DeadLetter(ctx, "projector: key: "+err.Error())
	}
	p.pub.Lock()
	defer p.pub.Unlock()
	p.mu.Lock()
	prev, ok := p.state[key]
	done := p.inputAt[key] >= d.Seq
	p.mu.Unlock()
	if done {
		return nil // reduced before a restart; its output is stored
	}
	next, err := p.cfg.Reduce(key, prev, ok, in, &d.Record)
	if err != nil {
		return err
	}
	id := uuid.NewSHA1(outputNS, []byte(p.cfg.Output+"\x00"+key+"\x00"+strconv.FormatUint(d.Seq, 10))).String()
	if err := p.publish(ctx, key, next, d.Seq, id); err != nil {
		return err
	}
	p.mu.Lock()
	p.state[key] = next
	p.inputAt[key] = d.Seq
	p.mu.Unlock()
	return nil
}

func (p *Projector[In, State]) publish(ctx context.Context, key string, s State, inputSeq uint64, id string) error {
	payload, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("projector: encode state of %q: %w", key, err)
	}
	_, err = p.cfg.Bus.Publish(ctx, p.cfg.Output, payload, event.WithKey(key), event.WithID(id),
		event.WithHeaders(map[string]string{HeaderInputSeq: strconv.FormatUint(inputSeq, 10)}))
	return err
}

func (p *Projector[In, State]) checkStale(ctx context.Context, now time.Time) error {
	p.mu.Lock()
	keys := make([]string, 0, len(p.state))
	for k := range p.state {
		keys = append(keys, k)
	}
	p.mu.Unlock()
	var errs []error
	for _, k := range keys {
		if err := p.staleKey(ctx, k, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Projector[In, State]) staleKey(ctx context.Context, key string, now time.Time) error {
	p.pub.Lock()
	defer p.pub.Unlock()
	p.mu.Lock()
	s, at := p.state[key], p.inputAt[key]
	p.mu.Unlock()
	ns, changed := p.cfg.Stale(key, s, now)
	if !changed {
		return nil
	}
	if err := p.publish(ctx, key, ns, at, uuid.NewString()); err != nil {
		return err
	}
	p.mu.Lock()
	p.state[key] = ns
	p.mu.Unlock()
	return nil
}
