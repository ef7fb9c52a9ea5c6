package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

// The document of a pruned topic in the topics collection holds, beside
// its counts (summary.go) and settings (topics.go), its prune state:
//
//	{_id: "<topic>", horizon: int64, floor: int64, tombSeq: int64, tombAt: date}
//
// horizon is the highest before any Prune of the topic announced (see
// recentCache), floor the retention floor, and (tombSeq, tombAt) a sweep
// mark: every seq up to tombSeq was written before tombAt. All of it is
// read and written by _id.
type topicDoc struct {
	Horizon int64      `bson:"horizon"`
	Floor   int64      `bson:"floor"`
	TombSeq int64      `bson:"tombSeq"`
	TombAt  *time.Time `bson:"tombAt"`
}

const (
	fHorizon = "horizon"
	fFloor   = "floor"
	fTombSeq = "tombSeq"
	fTombAt  = "tombAt"
)

// pruneChunk is how many candidate records Prune handles per round of
// writes.
const pruneChunk = 1000

// topicDoc reads the topics document of topic; a topic never pruned has
// the zero document.
func (s *Store) topicDoc(ctx context.Context, topic string) (topicDoc, error) {
	var d topicDoc
	err := s.topics.FindOne(ctx, bson.D{{Key: fID, Value: topic}}).Decode(&d)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return d, fmt.Errorf("mongostore: read the state of %q: %w", topic, err)
	}
	return d, nil
}

// raiseHorizon announces that a Prune of topic is about to delete records
// with ts < before, and waits 2*horizonTrust, so that no store serves such
// a record from its cache any more (see recentCache). It waits also when
// the horizon was that high already: the Prune that raised it may still
// be waiting.
func (s *Store) raiseHorizon(ctx context.Context, topic string, before int64) error {
	err := upsert(ctx, s.topics, bson.D{{Key: fID, Value: topic}},
		bson.D{{Key: "$max", Value: bson.D{{Key: fHorizon, Value: before}}}})
	if err != nil {
		return fmt.Errorf("mongostore: prune %q: raise the prune horizon: %w", topic, err)
	}
	t := time.NewTimer(2 * horizonTrust)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mongostore: prune %q: %w", topic, ctx.Err())
	}
}

// Floor implements [event.Pruner]: the floor of the topic's document in
// the topics collection, by _id.
func (s *Store) Floor(ctx context.Context, topic string) (uint64, error) {
	d, err := s.topicDoc(ctx, topic)
	if err != nil {
		return 0, err
	}
	return uint64(max(d.Floor, 1)), nil
}

// Prune implements [event.Pruner].
//
// It reads the head H first and considers only records up to H, so that
// records appended meanwhile are left alone. Before it deletes anything it
// raises the topic's prune horizon to before and waits 500ms, so that no
// store serves the records from its cache any more. A deleted record
// becomes a tombstone (see the package documentation): its seq stays
// taken, reads
// skip it, FindByID does not find it and its id can be appended again as
// a new record. Tombstones older than Config.TombstoneTTL are removed by a
// later Prune of the topic, except the topic's highest document, which
// Head and seq assignment rest on.
//
// Without keepLatest, one update turns every record with ts < before into
// a tombstone (by the (topic, ts) index), the floor rises to the lowest
// seq left (or H+1), and the latest entries below the floor are dropped.
// With keepLatest, the keyed records with ts < before are read by the
// (topic, ts) index, their keys' latest entries looked up by _id, and the
// records older than their key's latest become tombstones; keyless
// records stay. A record is deleted only if a later record of its key was
// stored, so an entry a crashed writer left behind (lower than its key's
// newest record) keeps records rather than losing them; Prune raises such
// an entry when it meets the newer record.
//
// Run it periodically, not per publish: it visits every record with
// ts < before.
func (s *Store) Prune(ctx context.Context, topic string, before int64, keepLatest bool) (int, error) {
	if err := event.ValidateTopic(topic); err != nil {
		return 0, err
	}
	if s.isClosed() {
		return 0, ErrClosed
	}
	h, err := s.head(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("mongostore: prune %q: read head: %w", topic, err)
	}
	headAt := s.cfg.Clock.Now() // every seq up to h was written before now
	if h == 0 {
		return 0, nil
	}
	if err := s.raiseHorizon(ctx, topic, before); err != nil {
		return 0, err
	}
	s.cacheDrop(topic) // frees the memory; correctness rests on the horizon

	var (
		n     int
		bytes int64
	)
	if keepLatest {
		n, bytes, err = s.compact(ctx, topic, before, h)
	} else {
		n, bytes, err = s.retain(ctx, topic, before, h)
	}
	if cerr := s.pruned(ctx, topic, n, bytes); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	if err := s.sweep(ctx, topic, h, headAt); err != nil {
		return n, err
	}
	return n, nil
}

// sizeOf sums the sz of the documents filter matches: the bytes of the
// records a prune is about to delete (tombstones have no ts and no sz).
// Two prunes of a topic at once may both count a record that only one
// deletes.
func (s *Store) sizeOf(ctx context.Context, topic string, filter bson.D) (int64, error) {
	cur, err := s.events.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: filter}},
		{{Key: "$group", Value: bson.D{{Key: fID, Value: nil}, {Key: "b", Value: bson.D{{Key: "$sum", Value: "$" + fSize}}}}}},
	})
	if err != nil {
		return 0, fmt.Errorf("mongostore: prune %q: sum the bytes: %w", topic, err)
	}
	var out []struct {
		B int64 `bson:"b"`
	}
	if err := cur.All(ctx, &out); err != nil {
		return 0, fmt.Errorf("mongostore: prune %q: sum the bytes: %w", topic, err)
	}
	if len(out) == 0 {
		return 0, nil
	}
	return out[0].B, nil
}

// retain deletes the records of topic up to seq h with ts < before and
// raises the floor. It returns how many records it deleted and their
// bytes.
func (s *Store) retain(ctx context.Context, topic string, before int64, h uint64) (int, int64, error) {
	filter := topicFilter(topic,
		bson.E{Key: fTS, Value: bson.D{{Key: "$lt", Value: before}}},
		bson.E{Key: fSeq, Value: bson.D{{Key: "$lte", Value: int64(h)}}},
	)
	bytes, err := s.sizeOf(ctx, topic, filter)
	if err != nil {
		return 0, 0, err
	}
	res, err := s.events.UpdateMany(ctx, filter, tombstoneUpdate)
	if err != nil {
		return 0, 0, fmt.Errorf("mongostore: prune %q: %w", topic, err)
	}
	n := int(res.ModifiedCount)
	if n == 0 {
		bytes = 0
	}
	n, err = s.raiseFloor(ctx, topic, h, n)
	return n, bytes, err
}

// raiseFloor raises the floor of topic to the lowest seq left after
// retain deleted n records.
func (s *Store) raiseFloor(ctx context.Context, topic string, h uint64, n int) (int, error) {
	d, err := s.topicDoc(ctx, topic)
	if err != nil {
		return n, err
	}
	// The lowest record left, walking (topic, seq) up from the old floor.
	floor := int64(h) + 1
	var low struct {
		Seq bson.RawValue `bson:"seq"`
	}
	err = s.events.FindOne(ctx, topicFilter(topic,
		bson.E{Key: fSeq, Value: bson.D{{Key: "$gte", Value: max(d.Floor, 1)}, {Key: "$lte", Value: int64(h)}}}, notGone),
		options.FindOne().SetSort(bson.D{{Key: fSeq, Value: 1}}).SetProjection(bson.D{{Key: fSeq, Value: 1}, {Key: fID, Value: 0}})).
		Decode(&low)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
	case err != nil:
		return n, fmt.Errorf("mongostore: prune %q: find the floor: %w", topic, err)
	default:
		if v, ok := intValue(low.Seq); ok {
			floor = v
		}
	}
	if floor > d.Floor {
		_, err := s.topics.UpdateOne(ctx, bson.D{{Key: fID, Value: topic}},
			bson.D{{Key: "$max", Value: bson.D{{Key: fFloor, Value: floor}}}}, options.UpdateOne().SetUpsert(true))
		if err != nil {
			return n, fmt.Errorf("mongostore: prune %q: raise the floor: %w", topic, err)
		}
	}
	// Entries of records below the floor point at tombstones: drop them.
	_, err = s.latest.DeleteMany(ctx, bson.D{{Key: fTopic, Value: topic}, {Key: fSeq, Value: bson.D{{Key: "$lt", Value: floor}}}})
	if err != nil {
		return n, fmt.Errorf("mongostore: prune %q: drop latest entries below the floor: %w", topic, err)
	}
	return n, nil
}

// compact deletes the keyed records of topic up to seq h with ts < before
// that a later record of their key superseded. It returns how many records
// it deleted and their bytes.
func (s *Store) compact(ctx context.Context, topic string, before int64, h uint64) (int, int64, error) {
	cur, err := s.events.Find(ctx, topicFilter(topic,
		bson.E{Key: fTS, Value: bson.D{{Key: "$lt", Value: before}}},
		bson.E{Key: fSeq, Value: bson.D{{Key: "$lte", Value: int64(h)}}},
		bson.E{Key: fKey, Value: bson.D{{Key: "$gt", Value: ""}}},
	), options.Find().SetProjection(bson.D{{Key: fID, Value: 1}, {Key: fSeq, Value: 1}, {Key: fKey, Value: 1}}).SetBatchSize(pruneChunk))
	if err != nil {
		return 0, 0, fmt.Errorf("mongostore: prune %q: %w", topic, err)
	}
	defer cur.Close(ctx)
	type cand struct {
		id  bson.RawValue
		seq int64
		key string
	}
	n := 0
	var bytes int64
	var chunk []cand
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		defer func() { chunk = chunk[:0] }()
		var keys []string
		seen := make(map[string]bool)
		for _, c := range chunk {
			if !seen[c.key] {
				seen[c.key] = true
				keys = append(keys, c.key)
			}
		}
		latest := make([]int64, len(keys)) // 0: no entry
		err := forEach(ctx, len(keys), func(ctx context.Context, i int) error {
			var d latestDoc
			err := s.latest.FindOne(ctx, bson.D{{Key: fID, Value: latestID(topic, keys[i])}}).Decode(&d)
			if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
				return fmt.Errorf("mongostore: prune %q: latest of key %q: %w", topic, keys[i], err)
			}
			latest[i] = d.Seq
			return nil
		})
		if err != nil {
			return err
		}
		top := make(map[string]int64, len(keys))
		for i, k := range keys {
			top[k] = latest[i]
		}
		var doomed bson.A
		repair := make(map[string]uint64)
		for _, c := range chunk {
			switch l := top[c.key]; {
			case l > c.seq:
				doomed = append(doomed, c.id)
			case l > 0 && l < c.seq:
				// A writer stored this record and failed to raise the
				// entry: raise it now.
				repair[c.key] = max(repair[c.key], uint64(c.seq))
			}
		}
		if len(repair) > 0 {
			if err := s.raiseLatest(ctx, topic, repair); err != nil {
				return fmt.Errorf("mongostore: prune %q: repair latest entries: %w", topic, err)
			}
		}
		if len(doomed) == 0 {
			return nil
		}
		filter := bson.D{
			{Key: fID, Value: bson.D{{Key: "$in", Value: doomed}}},
			{Key: fTS, Value: bson.D{{Key: "$lt", Value: before}}},
		}
		size, err := s.sizeOf(ctx, topic, filter)
		if err != nil {
			return err
		}
		res, err := s.events.UpdateMany(ctx, filter, tombstoneUpdate)
		if err != nil {
			return fmt.Errorf("mongostore: prune %q: %w", topic, err)
		}
		if res.ModifiedCount > 0 {
			bytes += size
		}
		n += int(res.ModifiedCount)
		return nil
	}
	for cur.Next(ctx) {
		seq, ok := intValue(cur.Current.Lookup(fSeq))
		key, kok := cur.Current.Lookup(fKey).StringValueOK()
		if !ok || !kok {
			continue // not a record this store wrote: left alone
		}
		id := cur.Current.Lookup(fID)
		id.Value = append([]byte(nil), id.Value...) // the cursor reuses its buffer
		chunk = append(chunk, cand{id: id, seq: seq, key: key})
		if len(chunk) == pruneChunk {
			if err := flush(); err != nil {
				return n, bytes, err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return n, bytes, fmt.Errorf("mongostore: prune %q: %w", topic, err)
	}
	err = flush()
	return n, bytes, err
}

// sweep removes the tombstones of topic that are older than TombstoneTTL
// and sets the next sweep mark. h is the head read when this Prune began,
// at or before headAt.
//
// Removing a tombstone frees its seq in the unique index. That is safe only
// for a seq no writer can try any more: a writer tries the seq after the
// head it knows, and refreshes what it knows when that is older than
// TombstoneTTL/4 (and a write lasts at most WriteTimeout, at most
// TombstoneTTL/4). The mark (tombSeq, tombAt) says that every seq up to
// tombSeq was written before tombAt; once tombAt is TombstoneTTL old,
// every writer knows a head at or above tombSeq, so the tombstones up to it
// can go. The topic's highest document stays whatever it is: Head and the
// writers' head lookups rest on it.
func (s *Store) sweep(ctx context.Context, topic string, h uint64, headAt time.Time) error {
	if s.cfg.TombstoneTTL < 0 {
		return nil
	}
	d, err := s.topicDoc(ctx, topic)
	if err != nil {
		return err
	}
	if d.TombAt != nil {
		if s.cfg.Clock.Now().Sub(*d.TombAt) < s.cfg.TombstoneTTL {
			return nil // the mark is not ripe; it stays
		}
		if bound := min(d.TombSeq, int64(h)-1); bound >= 1 {
			// Tombstones have no ts: the (topic, ts) index holds them
			// under null.
			_, err := s.events.DeleteMany(ctx, topicFilter(topic,
				bson.E{Key: fTS, Value: nil},
				bson.E{Key: fGone, Value: true},
				bson.E{Key: fSeq, Value: bson.D{{Key: "$lte", Value: bound}}},
			))
			if err != nil {
				return fmt.Errorf("mongostore: prune %q: remove old tombstones: %w", topic, err)
			}
		}
	}
	// A new mark, for the tombstones made since. Any valid mark may
	// replace another: a concurrent Prune's mark only delays a sweep.
	_, err = s.topics.UpdateOne(ctx, bson.D{{Key: fID, Value: topic}},
		bson.D{{Key: "$set", Value: bson.D{{Key: fTombSeq, Value: int64(h)}, {Key: fTombAt, Value: headAt}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("mongostore: prune %q: set the sweep mark: %w", topic, err)
	}
	return nil
}
