package mongostore

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

// Topic settings ([event.TopicStore]) are the field partitions of the
// topic's document in the topics collection, beside its counts (summary.go)
// and its prune state (prune.go):
//
//	{_id: "<topic>", partitions: int32, ...}
//
// Absent (or 0) until the topic has settings, the partition count after.
// The summary writer and Prune upsert the same document with operators on
// their own fields only, so none of them overwrites another's; a document
// that CreateTopic makes for a topic without records has no lastSeq, and
// ListTopics skips it until the first append counts. A database of an
// older release has no partitions field anywhere: its topics get their
// count from CreateTopic, which infers it from their records and cursors.
//
// One document per topic under the unique _id is what makes CreateTopic
// atomic: the settings are set by one conditional upsert,
//
//	update {_id: topic, partitions: {$not: {$gt: 0}}} set partitions: n, upsert
//
// which MongoDB applies to one document as one step. It matches a document
// without settings and sets them (this call created them), or matches
// nothing: then either there is no document and the upsert inserts one
// with the settings (created too), or the document has settings, and the
// upsert's insert fails on _id: another call created them, and they are
// read. Two calls that meet on the document are ordered by the server (a
// write conflict makes the second evaluate its filter again against the
// document the first left; two inserts of it collide on _id), so of
// concurrent creators, in one process or several, exactly one is told it
// created the settings, and all return the count it stored (or a greater
// one AddPartitions set since). A duplicate key also comes from an insert
// racing with the first summary or prune upsert of the document, which
// sets no settings: the call then tries again.
//
// The bundled test server (FerretDB 1.24) does not apply a single update
// atomically when connections work at once: two such upserts could both
// match the document without settings, and both report that they created
// them. Its proxy runs the commands of a database one at a time, which
// gives back the order MongoDB guarantees; the tests of concurrent
// creators rely on that.

const fPartitions = "partitions"

var _ event.TopicStore = (*Store)(nil)

// createTopicTries bounds the rounds of CreateTopic and AddPartitions that
// lose a race to another write of the topic's document; a round is lost
// only to a write that did not exist when it began, so more than a few
// in a row means something else is wrong.
const createTopicTries = 5

// CreateTopic implements [event.TopicStore]: a read of the topic's
// document by _id for a topic with settings; otherwise the count is
// inferred (see inferPartitions) and set by one conditional upsert (see
// above).
func (s *Store) CreateTopic(ctx context.Context, topic string, cfg event.TopicConfig) (event.TopicConfig, bool, error) {
	if err := event.ValidateTopic(topic); err != nil {
		return event.TopicConfig{}, false, err
	}
	if err := cfg.Validate(); err != nil {
		return event.TopicConfig{}, false, err
	}
	for range createTopicTries {
		n, err := s.partitions(ctx, topic)
		if err != nil {
			return event.TopicConfig{}, false, fmt.Errorf("mongostore: create topic %q: %w", topic, err)
		}
		if n > 0 {
			return event.TopicConfig{Partitions: n}, false, nil
		}
		n, err = s.inferPartitions(ctx, topic, cfg.Partitions)
		if err != nil {
			return event.TopicConfig{}, false, fmt.Errorf("mongostore: create topic %q: %w", topic, err)
		}
		noSettings := bson.D{
			{Key: fID, Value: topic},
			{Key: fPartitions, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: 0}}}}},
		}
		r, err := s.topics.UpdateOne(ctx, noSettings,
			bson.D{{Key: "$set", Value: bson.D{{Key: fPartitions, Value: int32(n)}}}},
			options.UpdateOne().SetUpsert(true))
		if err == nil && (r.MatchedCount > 0 || r.UpsertedCount > 0) {
			return event.TopicConfig{Partitions: n}, true, nil
		}
		if err != nil && !mongo.IsDuplicateKeyError(err) {
			return event.TopicConfig{}, false, fmt.Errorf("mongostore: create topic %q: %w", topic, err)
		}
		// The document exists and has settings (read them), or it was
		// inserted by another write at the same time (try again).
	}
	return event.TopicConfig{}, false, fmt.Errorf("mongostore: create topic %q: lost %d races for the topic's document in a row", topic, createTopicTries)
}

// Topic implements [event.TopicStore] with a read by _id.
func (s *Store) Topic(ctx context.Context, topic string) (event.TopicConfig, error) {
	n, err := s.partitions(ctx, topic)
	if err != nil {
		return event.TopicConfig{}, fmt.Errorf("mongostore: settings of topic %q: %w", topic, err)
	}
	if n == 0 {
		return event.TopicConfig{}, fmt.Errorf("%w: settings of topic %q", event.ErrNotFound, topic)
	}
	return event.TopicConfig{Partitions: n}, nil
}

// AddPartitions implements [event.TopicStore] with one update by _id on
// condition that the topic has settings with at most n partitions: the
// count is raised to n or stays n. Not matched, the document is read to
// tell why: no settings (event.ErrNotFound), or more partitions than n,
// refused with the error of [event.TopicConfig.CheckGrow]. A count only
// grows, so the read cannot find it lower than the update did; settings
// created between the two (a count of 1 to n) make the update run again.
func (s *Store) AddPartitions(ctx context.Context, topic string, n int) error {
	if err := event.ValidateTopic(topic); err != nil {
		return err
	}
	if err := (event.TopicConfig{Partitions: n}).Validate(); err != nil {
		return err
	}
	for range createTopicTries {
		r, err := s.topics.UpdateOne(ctx,
			bson.D{
				{Key: fID, Value: topic},
				{Key: fPartitions, Value: bson.D{{Key: "$gte", Value: 1}, {Key: "$lte", Value: n}}},
			},
			bson.D{{Key: "$max", Value: bson.D{{Key: fPartitions, Value: int32(n)}}}})
		if err != nil {
			return fmt.Errorf("mongostore: add partitions to %q: %w", topic, err)
		}
		if r.MatchedCount > 0 {
			return nil
		}
		had, err := s.partitions(ctx, topic)
		if err != nil {
			return fmt.Errorf("mongostore: add partitions to %q: %w", topic, err)
		}
		if had == 0 {
			return fmt.Errorf("%w: settings of topic %q", event.ErrNotFound, topic)
		}
		if had > n {
			return (event.TopicConfig{Partitions: had}).CheckGrow(topic, n)
		}
	}
	return fmt.Errorf("mongostore: add partitions to %q: lost %d races for the topic's document in a row", topic, createTopicTries)
}

// partitions returns the partition count stored for topic, 0 when it has
// no settings.
func (s *Store) partitions(ctx context.Context, topic string) (int, error) {
	var d struct {
		Partitions bson.RawValue `bson:"partitions"`
	}
	err := s.topics.FindOne(ctx, bson.D{{Key: fID, Value: topic}},
		options.FindOne().SetProjection(bson.D{{Key: fPartitions, Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if d.Partitions.Type == 0 || d.Partitions.Type == bson.TypeNull {
		return 0, nil
	}
	n, ok := intValue(d.Partitions)
	if !ok || n < 0 || n > event.MaxPartitions {
		return 0, fmt.Errorf("%w: topics document of %q: partitions is %s, want 0 to %d",
			ErrBadDocument, topic, extJSON(d.Partitions), event.MaxPartitions)
	}
	return int(n), nil
}

// inferPartitions returns the partition count of a topic without
// settings: the greatest of n and one more than the highest partition of
// the topic's records and of its cursor documents (cursors and leases),
// which a database of an older release holds. One query each, the highest
// partition first; on MongoDB it reads the topic's entries of an index
// with topic first and sorts them, keeping one (the bundled test server
// scans the collection). It runs until the topic has settings: once per
// topic.
func (s *Store) inferPartitions(ctx context.Context, topic string, n int) (int, error) {
	for _, c := range []*mongo.Collection{s.events, s.cursors} {
		var d struct {
			Partition bson.RawValue `bson:"partition"`
		}
		// $gte: 0 matches numbers only, so tombstones (no partition) and
		// a partition of another type are left out.
		err := c.FindOne(ctx,
			bson.D{{Key: fTopic, Value: topic}, {Key: fPartition, Value: bson.D{{Key: "$gte", Value: 0}}}},
			options.FindOne().
				SetSort(bson.D{{Key: fPartition, Value: -1}}).
				SetProjection(bson.D{{Key: fPartition, Value: 1}, {Key: fID, Value: 0}})).
			Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("highest partition in %s: %w", c.Name(), err)
		}
		p, ok := intValue(d.Partition)
		if !ok || p < 0 {
			return 0, fmt.Errorf("%w: %s: highest partition of %q is %s", ErrBadDocument, c.Name(), topic, extJSON(d.Partition))
		}
		if p >= event.MaxPartitions {
			return 0, fmt.Errorf("%w: partitions: %s holds partition %d of topic %q, and a topic has at most %d",
				event.ErrInvalid, c.Name(), p, topic, event.MaxPartitions)
		}
		n = max(n, int(p)+1)
	}
	return n, nil
}
