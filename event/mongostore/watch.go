package mongostore

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

var _ event.Notifier = (*Store)(nil)

// topicWatch is the watchers of one topic in this process and the poller
// that looks for records appended by other processes.
type topicWatch struct {
	chans  map[chan struct{}]struct{}
	head   uint64 // highest seq announced
	polled bool   // the poller has read the head at least once
	stop   chan struct{}
}

// Watch implements [event.Notifier]. The channel receives a value after
// this store appends records to topic, at once, and after another process
// did, within Config.PollInterval: while a topic has watchers, one poller
// per topic and store reads the topic's head at that interval (instead of
// every consumer group polling on its own).
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
			s.pollWG.Add(1)
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
	for ch := range tw.chans {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *Store) poll(topic string, tw *topicWatch) {
	defer s.pollWG.Done()
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	failing := false
	var last uint64
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(s.ctx, max(s.cfg.PollInterval, 5*time.Second))
		h, err := s.pollHead(ctx, topic, last, n%10 == 0)
		cancel()
		if err == nil {
			last = h
		}
		switch {
		case err != nil && s.ctx.Err() == nil && !failing:
			s.log.Warn("mongostore: poll for new records failed", "topic", topic, "err", err)
			failing = true
		case err == nil:
			failing = false
			s.watchMu.Lock()
			tw.polled = true
			s.watchMu.Unlock()
			s.announce(topic, h)
		}
		select {
		case <-tw.stop:
			return
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

// pollHead returns the head of topic, known to be at least last. Seqs are
// contiguous, so unless full is set it first looks up the _id of seq
// last+1, which is cheap on every server, and reads the head only if that
// exists. Every tenth poll reads the head in full, which also catches
// documents written by hand with other _ids.
func (s *Store) pollHead(ctx context.Context, topic string, last uint64, full bool) (uint64, error) {
	if !full && last > 0 {
		err := s.events.FindOne(ctx, bson.D{{Key: fID, Value: docID(topic, last+1)}},
			options.FindOne().SetProjection(bson.D{{Key: fID, Value: 1}})).Err()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return last, nil
		}
		if err != nil {
			return 0, err
		}
	}
	return s.head(ctx, topic)
}
