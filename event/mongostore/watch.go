package mongostore

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/watchhub"
)

var _ event.Notifier = (*Store)(nil)

// newHub returns the store's watch and poll hub: its pollers stop at
// Close (quit) and read the head with pollHead, in full every tenth poll.
func (s *Store) newHub() *watchhub.Hub {
	return watchhub.New(watchhub.Config{
		Name: "mongostore", Logger: s.log, Interval: s.cfg.PollInterval, Ctx: s.ctx, Quit: s.quit,
		Go: func(f func()) bool {
			s.mu.Lock()
			closed := s.closed
			if !closed {
				s.pollWG.Add(1)
			}
			s.mu.Unlock()
			if closed {
				return false
			}
			go func() {
				defer s.pollWG.Done()
				f()
			}()
			return true
		},
		Head: func(ctx context.Context, topic string, last uint64, n int) (uint64, error) {
			return s.pollHead(ctx, topic, last, n%10 == 0)
		},
	})
}

// Watch implements [event.Notifier]. The channel receives a value after
// this store appends records to topic, at once, and after another process
// did, within Config.PollInterval: while a topic has watchers, one poller
// per topic and store reads the topic's head at that interval (instead of
// every consumer group polling on its own).
func (s *Store) Watch(topic string) (<-chan struct{}, func()) { return s.hub.Watch(topic) }

// announce wakes the watchers of topic if head is beyond what they were
// told.
func (s *Store) announce(topic string, head uint64) { s.hub.Announce(topic, head) }

// pollHead returns the head of topic, known to be at least last. Seqs are
// contiguous, so unless full is set it first looks up the _id of seq
// last+1 (of seq 1 while the topic has shown no record), which is cheap on
// every server, and reads the head only if that exists. Every tenth poll
// reads the head in full, which also catches documents written by hand
// with other _ids, and a topic whose first seqs were pruned before its
// first poll. An empty topic is what a group's redrive topic mostly is:
// reading its head in full, the last entry of the (topic, seq) index, is
// a scan of the collection on a server without that index (the bundled
// test server: 0.36 s at 20,000 records, every PollInterval).
func (s *Store) pollHead(ctx context.Context, topic string, last uint64, full bool) (uint64, error) {
	if !full {
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
