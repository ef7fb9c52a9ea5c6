package watchhub

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Config configures a [Hub]. Every field is required but Quit.
type Config struct {
	// Name prefixes the warning of a failing poll ("mongostore").
	Name   string
	Logger *slog.Logger
	// Interval is the time between two polls of a topic.
	Interval time.Duration
	// Ctx is the store's lifetime: the pollers read heads in it and stop
	// when it ends. Quit, when not nil, also stops them when closed.
	Ctx  context.Context
	Quit <-chan struct{}
	// Go runs f, a poller, on a goroutine that the store's Close waits
	// for, and reports true; on a closed store it runs nothing and
	// reports false.
	Go func(f func()) bool
	// Head returns the head of topic, known to be at least last (the head
	// of the last poll that succeeded, 0 before one did); n counts the
	// polls of the topic from 0.
	Head func(ctx context.Context, topic string, last uint64, n int) (uint64, error)
}

// Hub is the watchers of the topics of one store.
type Hub struct {
	cfg    Config
	mu     sync.Mutex
	topics map[string]*topic
}

// topic is the watchers of one topic in this process and the poller
// that looks for records appended by other processes.
type topic struct {
	chans  map[chan struct{}]struct{}
	head   uint64 // highest seq announced
	polled bool   // the poller has read the head at least once
	stop   chan struct{}
}

// New returns a hub with no watchers. It starts no goroutine.
func New(cfg Config) *Hub {
	return &Hub{cfg: cfg, topics: make(map[string]*topic)}
}

// Watch implements [event.Notifier]'s Watch. The channel receives a value
// after the store announces records of topic beyond those it announced
// before ([Hub.Announce]), or wakes it ([Hub.Wake]): at once after an
// append of its own, and within Config.Interval after another process
// appended, found by the poller that runs while the topic has watchers
// (one per topic and store, instead of every consumer group polling on
// its own). The function stops the watch; the last one of a topic stops
// its poller.
//
// [event.Notifier]: https://pkg.go.dev/github.com/promethean/promlib/event#Notifier
func (h *Hub) Watch(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	t := h.topics[name]
	if t == nil {
		t = &topic{chans: make(map[chan struct{}]struct{}), stop: make(chan struct{})}
		h.topics[name] = t
		h.cfg.Go(func() { h.poll(name, t) })
	}
	t.chans[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			delete(t.chans, ch)
			if len(t.chans) == 0 && h.topics[name] == t {
				delete(h.topics, name)
				close(t.stop)
			}
		})
	}
}

// Announce wakes the watchers of topic if head is beyond what they were
// told: a process (this one or another) appended to topic up to head.
func (h *Hub) Announce(topic string, head uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.announce(topic, head)
}

// announce is Announce with h.mu held.
func (h *Hub) announce(name string, head uint64) {
	t := h.topics[name]
	if t == nil || head <= t.head {
		return
	}
	t.head = head
	t.wake()
}

// Wake wakes the watchers of topic, whatever head they were told: another
// process appended to it.
func (h *Hub) Wake(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[topic]; t != nil {
		t.wake()
	}
}

// Polled returns the highest head announced for topic, and whether the
// topic is watched and its poller has read the head at least once (so a
// newer head shows up within Config.Interval).
func (h *Hub) Polled(topic string) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[topic]; t != nil && t.polled {
		return t.head, true
	}
	return 0, false
}

func (t *topic) wake() {
	for ch := range t.chans {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *Hub) poll(name string, t *topic) {
	tick := time.NewTicker(h.cfg.Interval)
	defer tick.Stop()
	failing := false
	var last uint64
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(h.cfg.Ctx, max(h.cfg.Interval, 5*time.Second))
		head, err := h.cfg.Head(ctx, name, last, n)
		cancel()
		switch {
		case err != nil && h.cfg.Ctx.Err() == nil && !failing:
			h.cfg.Logger.Warn(h.cfg.Name+": poll for new records failed", "topic", name, "err", err)
			failing = true
		case err == nil:
			failing = false
			last = head
			h.mu.Lock()
			t.polled = true
			h.announce(name, head)
			h.mu.Unlock()
		}
		select {
		case <-t.stop:
			return
		case <-h.cfg.Quit:
			return
		case <-h.cfg.Ctx.Done():
			return
		case <-tick.C:
		}
	}
}
