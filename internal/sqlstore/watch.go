package sqlstore

import (
	"context"

	"github.com/promethean/promlib/internal/watchhub"
)

// newHub returns the store's watch and poll hub: its pollers run on the
// store's goroutines and read the head with Head.
func (s *Store) newHub() *watchhub.Hub {
	return watchhub.New(watchhub.Config{
		Name: s.d.Name, Logger: s.cfg.Logger, Interval: s.cfg.PollInterval, Ctx: s.ctx,
		Go: func(f func()) bool {
			s.mu.Lock()
			closed := s.closed
			if !closed {
				s.wg.Add(1)
			}
			s.mu.Unlock()
			if closed {
				return false
			}
			go func() {
				defer s.wg.Done()
				f()
			}()
			return true
		},
		Head: func(ctx context.Context, topic string, _ uint64, _ int) (uint64, error) { return s.Head(ctx, topic) },
	})
}

// Watch implements [event.Notifier]. The channel receives a value after
// this store appends records to topic, at once, and after another process
// did, when the dialect wakes the topic (see [Store.Wake]) or within
// Config.PollInterval: while a topic has watchers, one poller per topic
// and store reads the topic's head at that interval.
func (s *Store) Watch(topic string) (<-chan struct{}, func()) { return s.hub.Watch(topic) }

// announce wakes the watchers of topic if head is beyond what they were
// told.
func (s *Store) announce(topic string, head uint64) { s.hub.Announce(topic, head) }

// Announce wakes the watchers of topic if head is beyond what they were
// told: a process (this one or another) appended to topic up to head. A
// notice of this store's own append, which woke the watchers already, is
// ignored.
func (s *Store) Announce(topic string, head uint64) { s.hub.Announce(topic, head) }

// Wake wakes the watchers of topic: another process appended to it.
func (s *Store) Wake(topic string) { s.hub.Wake(topic) }
