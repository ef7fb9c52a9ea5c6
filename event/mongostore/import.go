package mongostore

import (
	"context"
	"encoding/json"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

var _ event.Importer = (*Store)(nil)

// ImportRecords implements [event.Importer]: after checking the head and
// the ids, one ordered InsertMany of the records at their seqs under the
// unique (topic, seq) and (topic, id) indexes; then the latest entries of
// their keys are raised and the topic's counts added, as after an append.
// MongoDB without transactions cannot store them in one step: an import
// that fails midway leaves the records before the failure stored, in seq
// order, and the head at the last of them, so that [event.Copy] run again
// continues after it. The seqs skipped hold no document (as after
// tombstones were swept, see [Store.Prune]); [Store.ImportHead] writes a
// tombstone at the head, which Head and the writers' head lookups rest on.
func (s *Store) ImportRecords(ctx context.Context, topic string, recs []event.Record) error {
	if err := event.ValidateTopic(topic); err != nil {
		return err
	}
	if s.isClosed() {
		return ErrClosed
	}
	if len(recs) == 0 {
		return nil
	}
	ids := make([]string, 0, len(recs))
	seen := make(map[string]bool, len(recs))
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Topic != topic:
			return invalid("topic", "record %d has topic %q in an import to %q", i, r.Topic, topic)
		case r.ID == "":
			return invalid("id", "record %d has no id", i)
		case i > 0 && r.Seq <= recs[i-1].Seq:
			return invalid("seq", "record %d has seq %d, not above the record before (%d)", i, r.Seq, recs[i-1].Seq)
		case r.Partition < 0 || r.Partition > 1<<31-1:
			return invalid("partition", "record %d has partition %d", i, r.Partition)
		case !r.IsBinary() && !json.Valid(r.Payload):
			return invalid("payload", "record %d (id %q) is not one JSON value", i, r.ID)
		case seen[r.ID]:
			return invalid("id", "record %d (seq %d): id %q twice in the import", i, r.Seq, r.ID)
		}
		if _, err := seqValue(r.Seq); err != nil {
			return err
		}
		if err := checkDocSize(r); err != nil {
			return err
		}
		seen[r.ID] = true
		ids = append(ids, r.ID)
	}
	if err := s.checkIndexes(ctx); err != nil {
		return err
	}
	head, err := s.head(ctx, topic)
	if err != nil {
		return fmt.Errorf("mongostore: import into %q: read head: %w", topic, err)
	}
	if recs[0].Seq <= head {
		return invalid("seq", "record 0 has seq %d, not above the head of %q (%d)", recs[0].Seq, topic, head)
	}
	if err := s.checkImportIDs(ctx, topic, ids); err != nil {
		return err
	}
	docs := make([]any, len(recs))
	for i := range recs {
		docs[i] = encodeRecord(&recs[i], recs[i].Seq)
	}
	_, insErr := s.events.InsertMany(ctx, docs, options.InsertMany().SetOrdered(true))
	s.cacheDrop(topic)
	stored := recs
	if insErr != nil {
		// Ordered: the records below the first failure are stored, and
		// Copy run again does not import them again, so they are counted
		// now, whatever ended the import (its context too).
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.WriteTimeout)
		defer cancel()
		ctx = wctx
		h, err := s.head(ctx, topic)
		if err != nil {
			return fmt.Errorf("mongostore: import %d records into %q from seq %d: %w (and reading the head after: %v)", len(recs), topic, recs[0].Seq, insErr, err)
		}
		n := 0
		for n < len(recs) && recs[n].Seq <= h {
			n++
		}
		stored = recs[:n]
	}
	if err := s.imported(ctx, topic, stored); err != nil {
		return err
	}
	if insErr != nil {
		return fmt.Errorf("mongostore: import %d records into %q from seq %d: %d stored: %w", len(recs), topic, recs[0].Seq, len(stored), insErr)
	}
	return nil
}

// imported raises the latest entries of the keys of recs, just stored in
// topic, and adds them to the topic's counts.
func (s *Store) imported(ctx context.Context, topic string, recs []event.Record) error {
	if len(recs) == 0 {
		return nil
	}
	var d summaryDelta
	top := make(map[string]uint64)
	for i := range recs {
		r := &recs[i]
		if d.events == 0 || r.TS < d.firstTS {
			d.firstTS = r.TS
		}
		if d.events == 0 {
			d.firstSeq = r.Seq
		}
		d.lastSeq, d.lastTS = r.Seq, r.TS
		d.events++
		d.bytes += recordBytes(r)
		if r.Key != "" {
			top[r.Key] = r.Seq
		}
	}
	if len(top) > 0 {
		if err := s.raiseLatest(ctx, topic, top); err != nil {
			return fmt.Errorf("mongostore: import into %q: records stored, latest by key not updated: %w", topic, err)
		}
	}
	s.writeSummary(ctx, topic, d)
	s.announce(topic, d.lastSeq)
	return nil
}

// checkImportIDs returns an error wrapping event.ErrInvalid if topic holds
// one of ids in a record. An id a tombstone holds is freed, as an append
// frees it.
func (s *Store) checkImportIDs(ctx context.Context, topic string, ids []string) error {
	cur, err := s.events.Find(ctx, topicFilter(topic, bson.E{Key: fRecID, Value: bson.D{{Key: "$in", Value: ids}}}))
	if err != nil {
		return fmt.Errorf("mongostore: import into %q: look up ids: %w", topic, err)
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		if isTombstone(cur.Current) {
			if err := s.freeID(ctx, cur.Current); err != nil {
				return fmt.Errorf("mongostore: import into %q: %w", topic, err)
			}
			continue
		}
		id, _ := cur.Current.Lookup(fRecID).StringValueOK()
		seq, _ := intValue(cur.Current.Lookup(fSeq))
		return invalid("id", "topic %q holds id %q already, at seq %d", topic, id, seq)
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("mongostore: import into %q: look up ids: %w", topic, err)
	}
	return nil
}

// ImportHead implements [event.Importer]. A head above the topic's
// highest document is written as a tombstone at that seq (its id is the
// seq, as a freed tombstone's: no record id is an integer), which keeps
// the seq taken; the floor and the last seq of the topic's summary are
// raised with $max.
func (s *Store) ImportHead(ctx context.Context, topic string, head, floor uint64) error {
	if err := event.ValidateTopic(topic); err != nil {
		return err
	}
	if s.isClosed() {
		return ErrClosed
	}
	h, err := seqValue(head)
	if err != nil {
		return err
	}
	f, err := seqValue(floor)
	if err != nil {
		return err
	}
	cur, err := s.head(ctx, topic)
	if err != nil {
		return fmt.Errorf("mongostore: import the head of %q: %w", topic, err)
	}
	if cur < head {
		_, err := s.events.InsertOne(ctx, bson.D{
			{Key: fID, Value: docID(topic, head)}, {Key: fTopic, Value: topic}, {Key: fSeq, Value: h},
			{Key: fRecID, Value: h}, {Key: fGone, Value: true},
		})
		if err != nil {
			return fmt.Errorf("mongostore: import the head of %q: %w", topic, err)
		}
		s.cacheDrop(topic)
		s.announce(topic, head)
	}
	if h == 0 {
		return nil
	}
	err = upsert(ctx, s.topics, bson.D{{Key: fID, Value: topic}}, bson.D{
		{Key: "$max", Value: bson.D{{Key: fFloor, Value: min(max(f, 1), h+1)}, {Key: fLastSeq, Value: h}}},
	})
	if err != nil {
		return fmt.Errorf("mongostore: import the head of %q: %w", topic, err)
	}
	return nil
}
