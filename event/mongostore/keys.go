package mongostore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

// The latest collection holds one document per key of a topic:
//
//	{_id: "<topic>/<key>", topic, key, seq: int64}
//
// seq is the highest seq of the key's records, raised with $max after each
// insert. Topic names have no '/', so the _id names one (topic, key).
type latestDoc struct {
	Key string `bson:"key"`
	Seq int64  `bson:"seq"`
}

// latestID is the _id of the latest document of key in topic.
func latestID(topic, key string) string { return topic + "/" + key }

// lookupConcurrency bounds the _id lookups LatestByKey and Latest run at
// once.
const lookupConcurrency = 16

// raiseLatest raises the latest entry of each key of the stored slots to
// the highest seq among them. It runs after every write, for the records
// just inserted and for those found stored already (so that appending a
// record again repairs an entry a crashed writer left behind). When it
// fails, the Appends of the keyed records fail too: they are stored, and
// appending them again is safe and completes the entries.
func (a *appender) raiseLatest(ctx context.Context, slots []*slot) {
	top := make(map[string]uint64)
	for _, sl := range slots {
		if sl.done && sl.err == nil && sl.stored.Key != "" {
			top[sl.stored.Key] = max(top[sl.stored.Key], sl.stored.Seq)
		}
	}
	if len(top) == 0 {
		return
	}
	if err := a.s.raiseLatest(ctx, a.topic, top); err != nil {
		err = fmt.Errorf("mongostore: append to %q: records stored, latest by key not updated (appending them again is safe): %w", a.topic, err)
		for _, sl := range slots {
			if sl.done && sl.err == nil && sl.stored.Key != "" {
				sl.err = err
			}
		}
	}
}

// raiseLatest sets the latest entry of each key to its seq unless it holds
// a higher one: an upsert by _id with $max, atomic per document, so
// writers in several processes can race on a key and the highest seq
// stays. All keys go in one unordered bulk write.
func (s *Store) raiseLatest(ctx context.Context, topic string, top map[string]uint64) error {
	models := make([]mongo.WriteModel, 0, len(top))
	for k, seq := range top {
		models = append(models, mongo.NewUpdateOneModel().
			SetFilter(bson.D{{Key: fID, Value: latestID(topic, k)}}).
			SetUpdate(bson.D{
				{Key: "$max", Value: bson.D{{Key: fSeq, Value: int64(seq)}}},
				{Key: "$setOnInsert", Value: bson.D{{Key: fTopic, Value: topic}, {Key: fKey, Value: k}}},
			}).
			SetUpsert(true))
	}
	for try := 0; ; try++ {
		_, err := s.latest.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		var bwe mongo.BulkWriteException
		if err == nil || try > 0 || !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
			return err
		}
		// Two upserts of a new key raced and one insert lost: the document
		// exists now, so the update applies on a second try.
		var again []mongo.WriteModel
		for _, we := range bwe.WriteErrors {
			if !isDuplicateKey(we.Code) || we.Index < 0 || we.Index >= len(models) {
				return err
			}
			again = append(again, models[we.Index])
		}
		models = again
	}
}

// LatestByKey implements [event.KeyStore]: for each key, its latest entry
// and then its record, both looked up by _id (an equality on _id alone is
// served by the _id index on every server, and is the one filter the
// bundled test server answers without decoding documents). Up to 16
// lookups run at once.
func (s *Store) LatestByKey(ctx context.Context, topic string, keys []string) (map[string]event.Record, error) {
	if err := event.ValidateTopic(topic); err != nil {
		return nil, err
	}
	var uniq []string
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if k != "" && !seen[k] {
			seen[k] = true
			uniq = append(uniq, k)
		}
	}
	out := make(map[string]event.Record, len(uniq))
	var mu sync.Mutex
	err := forEach(ctx, len(uniq), func(ctx context.Context, i int) error {
		k := uniq[i]
		var d latestDoc
		err := s.latest.FindOne(ctx, bson.D{{Key: fID, Value: latestID(topic, k)}}).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("mongostore: latest of key %q in %q: %w", k, topic, err)
		}
		rec, ok, err := s.recordAt(ctx, topic, d.Seq)
		if err != nil || !ok || rec.Key != k {
			return err
		}
		mu.Lock()
		out[k] = rec
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Latest implements [event.KeyStore]. The entries come from the (topic,
// key) index of the latest collection, in key order; their records are
// looked up by _id as in LatestByKey. An entry whose record was deleted
// (by retention) is skipped, and the page is filled up from further
// entries.
func (s *Store) Latest(ctx context.Context, topic, afterKey string, limit int) ([]event.Record, error) {
	if limit <= 0 {
		return nil, invalid("limit", "%d, want at least 1", limit)
	}
	if err := event.ValidateTopic(topic); err != nil {
		return nil, err
	}
	var out []event.Record
	after := afterKey
	for len(out) < limit {
		want := min(limit-len(out), 1000)
		cur, err := s.latest.Find(ctx,
			bson.D{{Key: fTopic, Value: topic}, {Key: fKey, Value: bson.D{{Key: "$gt", Value: after}}}},
			options.Find().SetSort(bson.D{{Key: fKey, Value: 1}}).SetLimit(int64(want)).
				SetProjection(bson.D{{Key: fKey, Value: 1}, {Key: fSeq, Value: 1}}))
		if err != nil {
			return nil, fmt.Errorf("mongostore: latest of %q after key %q: %w", topic, after, err)
		}
		var entries []latestDoc
		if err := cur.All(ctx, &entries); err != nil {
			return nil, fmt.Errorf("mongostore: latest of %q after key %q: %w", topic, after, err)
		}
		recs := make([]event.Record, len(entries))
		found := make([]bool, len(entries))
		err = forEach(ctx, len(entries), func(ctx context.Context, i int) error {
			rec, ok, err := s.recordAt(ctx, topic, entries[i].Seq)
			recs[i], found[i] = rec, ok && rec.Key == entries[i].Key
			return err
		})
		if err != nil {
			return nil, err
		}
		for i := range entries {
			if found[i] {
				out = append(out, recs[i])
			}
		}
		if len(entries) < want {
			break
		}
		after = entries[len(entries)-1].Key
	}
	return out, nil
}

// recordAt returns the record of seq in topic, looked up by _id, and false
// if there is none (or only its tombstone).
func (s *Store) recordAt(ctx context.Context, topic string, seq int64) (event.Record, bool, error) {
	if seq < 1 {
		return event.Record{}, false, nil
	}
	raw, err := s.events.FindOne(ctx, bson.D{{Key: fID, Value: docID(topic, uint64(seq))}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return event.Record{}, false, nil
	}
	if err != nil {
		return event.Record{}, false, fmt.Errorf("mongostore: look up seq %d of %q: %w", seq, topic, err)
	}
	if isTombstone(raw) {
		return event.Record{}, false, nil
	}
	rec, err := decodeRecord(topic, raw)
	if err != nil {
		return event.Record{}, false, err
	}
	return rec, true, nil
}

// forEach runs f(0..n-1), up to lookupConcurrency at once, and returns the
// first error; after an error the ctx of the calls still running is
// cancelled and no new call starts.
func forEach(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, lookupConcurrency)
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
