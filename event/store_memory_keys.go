package event

import (
	"context"
	"slices"
	"sort"
)

// LatestByKey implements [KeyStore].
func (s *MemoryStore) LatestByKey(ctx context.Context, topic string, keys []string) (map[string]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]Record, len(keys))
	t := s.topics[topic]
	if t == nil {
		return out, nil
	}
	for _, k := range keys {
		if seq, ok := t.latest[k]; ok {
			out[k] = t.record(topic, seq)
		}
	}
	return out, nil
}

// Latest implements [KeyStore].
func (s *MemoryStore) Latest(ctx context.Context, topic, afterKey string, limit int) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, invalid("limit", "%d, want at least 1", limit)
	}
	s.mu.Lock() // the sorted key cache may be rebuilt
	defer s.mu.Unlock()
	t := s.topics[topic]
	if t == nil {
		return nil, nil
	}
	if t.sortedKeys == nil {
		t.sortedKeys = make([]string, 0, len(t.latest))
		for k := range t.latest {
			t.sortedKeys = append(t.sortedKeys, k)
		}
		slices.Sort(t.sortedKeys)
	}
	i := sort.SearchStrings(t.sortedKeys, afterKey)
	if i < len(t.sortedKeys) && t.sortedKeys[i] == afterKey {
		i++
	}
	var out []Record
	for ; i < len(t.sortedKeys) && len(out) < limit; i++ {
		out = append(out, t.record(topic, t.latest[t.sortedKeys[i]]))
	}
	return out, nil
}

// Prune implements [Pruner]. It visits every record from the floor up, so
// run it periodically, not per publish.
func (s *MemoryStore) Prune(ctx context.Context, topic string, before int64, keepLatest bool) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[topic]
	if t == nil {
		return 0, nil
	}
	n := 0
	for seq := t.floor; seq <= t.head; seq++ {
		m := t.at(seq)
		if m.deleted || m.ts >= before {
			continue
		}
		k := t.keyOf(m)
		if keepLatest && (k == "" || t.latest[k] == seq) {
			continue // the state of its key (or a record no key supersedes)
		}
		before := t.bytes
		t.delete(seq, m)
		s.bytes -= before - t.bytes
		n++
	}
	if !keepLatest {
		for t.floor <= t.head && t.at(t.floor).deleted {
			t.floor++
		}
	}
	if t.events == 0 {
		t.first = 0
	}
	for t.first != 0 && t.at(t.first).deleted {
		t.first++
	}
	return n, nil
}

// delete removes the record at seq: its id may be stored again, its payload
// is released, and a key whose latest record it was loses its state.
func (t *memTopic) delete(seq uint64, m *memRecord) {
	m.deleted = true
	e := t.extOf(m)
	t.events--
	t.bytes -= int64(m.n)
	if e != nil {
		t.bytes -= extBytes(e.key, e.headers)
	}
	switch {
	case e != nil && e.id != "":
		delete(t.byID, e.id)
	case t.byUID[m.uid] == seq:
		delete(t.byUID, m.uid)
	}
	if e != nil {
		if e.key != "" && t.latest[e.key] == seq {
			delete(t.latest, e.key)
			t.sortedKeys = nil
		}
		*e = memExt{id: e.id} // the id stays for lookups of this seq
	}
	t.releasePayload(m)
}

// Floor implements [Pruner].
func (s *MemoryStore) Floor(ctx context.Context, topic string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if t := s.topics[topic]; t != nil {
		return t.floor, nil
	}
	return 1, nil
}
