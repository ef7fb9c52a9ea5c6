package sqlstore

import (
	"context"
	"sync"
	"time"
)

// topicWatch is the watchers of one topic in this process and the poller
// that looks for records appended by other processes.
type topicWatch struct {
	chans map[chan struct{}]struct{}
	head  uint64 // highest seq announced
	stop  chan struct{}
}

// Watch implements [event.Notifier]. The channel receives a value after
// this store appends records to topic, at once, and after another process
// did, when the dialect wakes the topic (see [Store.Wake]) or within
// Config.PollInterval: while a topic has watchers, one poller per topic
// and store reads the topic's head at that interval.
func (s *Store) Watch(topic string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.watchMu.Lock()
	tw := s.watches[topic]
	if tw == nil {
		tw = &topicWatch{chans: make(map[chan struct{}]struct{}), stop: make(chan struct{})}
		s.watches[topic] = tw
		s.mu.Lock()
		closed := s.closed
		if !closed {
			s.wg.Add(1)
		}
		s.mu.Unlock()
		if !closed {
			go s.poll(topic, tw)
		}
	}
	tw.chans[ch] = struct{}{}
	s.watchMu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.watchMu.Lock()
			defer s.watchMu.Unlock()
			delete(tw.chans, ch)
			if len(tw.chans) == 0 && s.watches[topic] == tw {
				delete(s.watches, topic)
				close(tw.stop)
			}
		})
	}
}

// announce wakes the watchers of topic if head is beyond what they were
// told.
func (s *Store) announce(topic string, head uint64) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	tw := s.watches[topic]
	if tw == nil || head <= tw.head {
		return
	}
	tw.head = head
	tw.wake()
}

func (tw *topicWatch) wake() {
	for ch := range tw.chans {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Announce wakes the watchers of topic if head is beyond what they were
// told: a process (this one or another) appended to topic up to head. A
// notice of this store's own append, which woke the watchers already, is
// ignored.
func (s *Store) Announce(topic string, head uint64) { s.announce(topic, head) }

// Wake wakes the watchers of topic: another process appended to it.
func (s *Store) Wake(topic string) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if tw := s.watches[topic]; tw != nil {
		tw.wake()
	}
}

func (s *Store) poll(topic string, tw *topicWatch) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	failing := false
	for {
		ctx, cancel := context.WithTimeout(s.ctx, max(s.cfg.PollInterval, 5*time.Second))
		h, err := s.Head(ctx, topic)
		cancel()
		switch {
		case err != nil && s.ctx.Err() == nil && !failing:
			s.cfg.Logger.Warn(s.d.Name+": poll for new records failed", "topic", topic, "err", err)
			failing = true
		case err == nil:
			failing = false
			s.announce(topic, h)
		}
		select {
		case <-tw.stop:
			return
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}
