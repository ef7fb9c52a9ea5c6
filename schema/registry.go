package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// DefaultHeader is the header that carries the schema version of an event.
const DefaultHeader = "schema-version"

// Config configures a [Registry]. The zero value of every field but Store
// means its default.
type Config struct {
	// Store keeps the versions; required ([NewMemoryStore], or a
	// database's, e.g. mongoschema).
	Store Store
	// Header is the header that gets the version an event was validated
	// against (default "schema-version").
	Header string
	// RefreshInterval is how often [Registry.Run] reloads the store, to
	// see versions other processes registered (default 5s).
	RefreshInterval time.Duration
	// Clock stamps Created (nil: the system clock).
	Clock clock.Clock
	// Logger receives refresh errors of Run; nil discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Header == "" {
		c.Header = DefaultHeader
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = 5 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of c, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, invalid("Store", "nil"))
	}
	if c.RefreshInterval < 0 {
		errs = append(errs, invalid("RefreshInterval", "negative"))
	}
	return errors.Join(errs...)
}

// Registry holds the schemas of topics and validates payloads against
// them. It keeps the current version of every topic in memory, so that
// a publish to a topic without a schema costs one map lookup.
type Registry struct {
	cfg Config
	mu  sync.Mutex // serialises Register and Refresh
	cur atomic.Pointer[map[string]*current]
}

// current is a topic's newest version, compiled.
type current struct {
	v      Version
	s      *jsonschema.Schema
	header string // the version as a header value
}

// NewRegistry loads the versions of cfg.Store and returns the Registry.
func NewRegistry(ctx context.Context, cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	r := &Registry{cfg: cfg}
	empty := map[string]*current{}
	r.cur.Store(&empty)
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Refresh reloads every topic's current version from the store.
func (r *Registry) Refresh(ctx context.Context) error {
	all, err := r.cfg.Store.All(ctx)
	if err != nil {
		return fmt.Errorf("schema: load: %w", err)
	}
	latest := map[string]Version{}
	for _, v := range all {
		if o, ok := latest[v.Topic]; !ok || v.Version > o.Version {
			latest[v.Topic] = v
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.cur.Load()
	next := make(map[string]*current, len(latest))
	for t, v := range latest {
		if o := old[t]; o != nil && o.v.Version >= v.Version {
			next[t] = o
			continue
		}
		c, err := compileVersion(v)
		if err != nil {
			return fmt.Errorf("schema: topic %s v%d in the store: %w", t, v.Version, err)
		}
		next[t] = c
	}
	for t, o := range old {
		if _, ok := next[t]; !ok {
			next[t] = o
		}
	}
	r.cur.Store(&next)
	return nil
}

func compileVersion(v Version) (*current, error) {
	doc, err := decode(v.Schema)
	if err != nil {
		return nil, err
	}
	s, err := compile(doc)
	if err != nil {
		return nil, err
	}
	return &current{v: v, s: s, header: strconv.Itoa(v.Version)}, nil
}

// Run refreshes the registry every RefreshInterval until ctx ends, so
// that versions registered by other processes sharing the store take
// effect here; it returns ctx's error.
func (r *Registry) Run(ctx context.Context) error {
	t := r.cfg.Clock.NewTimer(r.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
		t.Reset(r.cfg.RefreshInterval)
		if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("schema: refresh failed", "err", err)
		}
	}
}

// Register adds doc as the next version of topic's schema, under rule
// ("" keeps the topic's rule; a new topic's default is none). Under a rule
// other than none, the new version must keep the rule against the current
// one ([Compatible]); the refusal is an [*IncompatibleError] or a
// [*KeywordError]. Registering the current schema again under the same
// rule returns the current version and stores nothing.
func (r *Registry) Register(ctx context.Context, topic string, doc json.RawMessage, rule Rule) (Version, error) {
	if err := event.ValidateTopic(topic); err != nil {
		return Version{}, invalid("topic", "%v", err)
	}
	if rule != "" {
		if err := rule.Validate(); err != nil {
			return Version{}, err
		}
	}
	d, err := decode(doc)
	if err != nil {
		return Version{}, err
	}
	if _, err := compile(d); err != nil {
		return Version{}, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		return Version{}, fmt.Errorf("%w: %v", ErrBadSchema, err)
	}
	for attempt := 0; ; attempt++ {
		vs, err := r.cfg.Store.Versions(ctx, topic)
		if err != nil {
			return Version{}, fmt.Errorf("schema: load %s: %w", topic, err)
		}
		next := Version{Topic: topic, Version: 1, Schema: compact.Bytes(), Rule: rule, Created: r.cfg.Clock.Now().UTC()}
		if len(vs) > 0 {
			prev := vs[len(vs)-1]
			if next.Rule == "" {
				next.Rule = prev.Rule
			}
			if bytes.Equal(prev.Schema, next.Schema) && prev.Rule == next.Rule {
				return prev, nil
			}
			if err := Compatible(next.Rule, prev.Schema, next.Schema); err != nil {
				var ie *IncompatibleError
				if errors.As(err, &ie) {
					ie.Topic = topic
				}
				return Version{}, err
			}
			next.Version = prev.Version + 1
		} else if next.Rule == "" {
			next.Rule = RuleNone
		}
		if next.Rule != RuleNone {
			// The next registration will be checked: the subset must hold.
			if err := checkSubset(d, ""); err != nil {
				return Version{}, err
			}
		}
		err = r.cfg.Store.Add(ctx, next)
		if errors.Is(err, ErrVersionExists) && attempt < 3 {
			continue // another process registered first: check against it
		}
		if err != nil {
			return Version{}, fmt.Errorf("schema: store %s v%d: %w", topic, next.Version, err)
		}
		c, err := compileVersion(next)
		if err != nil {
			return Version{}, err
		}
		r.install(c)
		return next, nil
	}
}

// install makes c its topic's current version unless a newer one is.
func (r *Registry) install(c *current) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.cur.Load()
	if o := old[c.v.Topic]; o != nil && o.v.Version >= c.v.Version {
		return
	}
	next := maps.Clone(old)
	next[c.v.Topic] = c
	r.cur.Store(&next)
}

// Current returns topic's current version, as this registry last loaded
// it; ErrNotFound when it has none.
func (r *Registry) Current(topic string) (Version, error) {
	c := (*r.cur.Load())[topic]
	if c == nil {
		return Version{}, fmt.Errorf("%w: topic %s", ErrNotFound, topic)
	}
	return c.v, nil
}

// Topics returns the topics with a schema, sorted.
func (r *Registry) Topics() []string {
	return slices.Sorted(maps.Keys(*r.cur.Load()))
}

// Versions returns every version of topic's schema, oldest first, from
// the store.
func (r *Registry) Versions(ctx context.Context, topic string) ([]Version, error) {
	return r.cfg.Store.Versions(ctx, topic)
}

// Validate checks payload (of content type ct, "" for JSON) against
// topic's current schema. It returns the version it checked against (0
// when the topic has no schema: then anything is valid), and a
// [*ValidationError] for a payload that does not match. A binary payload
// on a topic with a schema is refused; so is nothing else.
func (r *Registry) Validate(topic string, payload []byte, ct string) (int, error) {
	c := (*r.cur.Load())[topic]
	if c == nil {
		return 0, nil
	}
	return c.v.Version, c.validate(payload, ct)
}

func (c *current) validate(payload []byte, ct string) error {
	if ct != "" && !event.IsJSONContentType(ct) {
		return &ValidationError{Topic: c.v.Topic, Version: c.v.Version, Reason: "content type " + ct + " is not JSON: a topic with a schema takes JSON payloads"}
	}
	if p, reason, ok := validatePayload(c.s, payload); !ok {
		return &ValidationError{Topic: c.v.Topic, Version: c.v.Version, Pointer: p, Reason: reason}
	}
	return nil
}
