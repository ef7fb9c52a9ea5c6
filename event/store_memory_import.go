package event

import (
	"context"
)

var _ Importer = (*MemoryStore)(nil)

// ImportRecords implements [Importer]: the records are checked first and
// stored together, under the store's lock.
func (s *MemoryStore) ImportRecords(ctx context.Context, topic string, recs []Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[topic]
	head := uint64(0)
	if t != nil {
		head = t.head
	}
	seen := make(map[string]bool, len(recs))
	for i := range recs {
		r := &recs[i]
		if err := checkImported(r, i, topic, head); err != nil {
			return err
		}
		head = r.Seq
		u, isUUID := parseUUID(r.ID)
		if _, ok := t.lookupIn(r.ID, u, isUUID); ok || seen[r.ID] {
			return invalid("id", "record %d (seq %d): topic %q holds id %q already", i, r.Seq, topic, r.ID)
		}
		seen[r.ID] = true
	}
	if err := s.checkLimits(topic, recs); err != nil {
		return err
	}
	t = s.topic(topic)
	for i := range recs {
		r := recs[i]
		t.skipTo(r.Seq - 1)
		u, isUUID := parseUUID(r.ID)
		t.append(&r, u, isUUID)
		s.bytes += recordBytes(&r)
	}
	if len(recs) > 0 {
		s.wake(topic)
	}
	return nil
}

// checkImported checks record i of an import into topic whose head (or
// the seq of the record before) is after.
func checkImported(r *Record, i int, topic string, after uint64) error {
	switch {
	case r.Topic != topic:
		return invalid("topic", "record %d has topic %q in an import to %q", i, r.Topic, topic)
	case r.ID == "":
		return invalid("id", "record %d has no id", i)
	case r.Seq <= after:
		return invalid("seq", "record %d has seq %d, not above %d (the topic's head, or the record before)", i, r.Seq, after)
	case r.Partition < 0 || r.Partition > 1<<31-1:
		return invalid("partition", "record %d has partition %d", i, r.Partition)
	}
	return nil
}

// lookupIn is lookup on a topic that may not exist.
func (t *memTopic) lookupIn(id string, u [16]byte, isUUID bool) (uint64, bool) {
	if t == nil {
		return 0, false
	}
	return t.lookup(id, u, isUUID)
}

// skipTo raises the head to seq with empty (deleted) slots, whose seqs
// are never given.
func (t *memTopic) skipTo(seq uint64) {
	for t.head < seq {
		t.head++
		i := t.head - 1
		if i%memChunk == 0 {
			t.chunks = append(t.chunks, make([]memRecord, 0, memChunk))
		}
		c := &t.chunks[len(t.chunks)-1]
		*c = append(*c, memRecord{deleted: true})
		t.noteID(t.head, "")
	}
}

// ImportHead implements [Importer].
func (s *MemoryStore) ImportHead(ctx context.Context, topic string, head, floor uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topic(topic)
	t.skipTo(head)
	t.floor = max(t.floor, min(floor, t.head+1))
	return nil
}

// wake tells the watchers of topic that it has new records. Called with
// s.mu held.
func (s *MemoryStore) wake(topic string) {
	for _, w := range s.watchers[topic] {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}
