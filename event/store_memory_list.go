package event

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"
)

// memGroup is the summary of a consumer group in a MemoryStore: the
// partitions it has a cursor or a lease on. Cursors, leases, members and
// group state are found from it by key.
type memGroup struct {
	parts  map[int]struct{}
	cfg    *GroupConfig // nil: no settings
	active int64        // LastActive (Unix ms)
}

// touch records that the group is in use until t.
func (g *memGroup) touch(t time.Time) { g.active = max(g.active, t.UnixMilli()) }

// group returns the summary of group on topic, made if new. Called with
// s.mu held for writing.
func (s *MemoryStore) group(topic, group string) *memGroup {
	gs := s.groups[topic]
	if gs == nil {
		gs = make(map[string]*memGroup)
		s.groups[topic] = gs
	}
	g := gs[group]
	if g == nil {
		g = &memGroup{parts: make(map[int]struct{})}
		gs[group] = g
	}
	return g
}

// ListTopics implements [Lister] from the counts each topic keeps.
func (s *MemoryStore) ListTopics(ctx context.Context) ([]TopicInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]TopicInfo, 0, len(s.topics))
	for name, t := range s.topics {
		ti := TopicInfo{Topic: name, Events: int64(t.events), LastSeq: t.head, Bytes: t.bytes}
		if t.head > 0 {
			ti.LastTS = t.at(t.head).ts
		}
		if t.first != 0 {
			ti.FirstSeq, ti.FirstTS = t.first, t.at(t.first).ts
		}
		out = append(out, ti)
	}
	slices.SortFunc(out, func(a, b TopicInfo) int { return strings.Compare(a.Topic, b.Topic) })
	return out, nil
}

// ListGroups implements [Lister] from the groups' summaries.
func (s *MemoryStore) ListGroups(ctx context.Context, topic string) ([]GroupInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var head uint64
	if t := s.topics[topic]; t != nil {
		head = t.head
	}
	now := s.clock.Now()
	gs := s.groups[topic]
	out := make([]GroupInfo, 0, len(gs))
	for _, name := range slices.Sorted(maps.Keys(gs)) {
		mg := gs[name]
		gi := GroupInfo{Topic: topic, Group: name, Head: head, LastActive: mg.active}
		if mg.cfg != nil {
			c := *mg.cfg
			gi.Config = &c
		}
		for m, exp := range s.members[groupKey{topic, name}] {
			if exp.After(now) {
				gi.Members = append(gi.Members, m)
			}
		}
		for p := range mg.parts {
			ref := PartitionRef{Topic: topic, Group: name, Partition: p}
			pi := PartitionInfo{Partition: p, Cursor: s.cursors[ref]}
			if l, ok := s.leases[ref]; ok && l.expires.After(now) {
				pi.Owner = l.member
			}
			for _, v := range s.gstate[ref] {
				if v != memSettled {
					pi.InFlight++
				}
			}
			gi.Partitions = append(gi.Partitions, pi)
		}
		gi.Summarise()
		out = append(out, gi)
	}
	return out, nil
}

// DeleteGroup implements [Lister].
func (s *MemoryStore) DeleteGroup(ctx context.Context, topic, group string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[topic][group]; g != nil {
		s.deleteGroup(topic, group, g)
	}
	return nil
}

// deleteGroup deletes g, group on topic, and all it has. Called with s.mu
// held for writing.
func (s *MemoryStore) deleteGroup(topic, group string, g *memGroup) {
	for p := range g.parts {
		ref := PartitionRef{Topic: topic, Group: group, Partition: p}
		delete(s.cursors, ref)
		delete(s.leases, ref)
		delete(s.gstate, ref)
	}
	delete(s.members, groupKey{topic, group})
	delete(s.groups[topic], group)
	if len(s.groups[topic]) == 0 {
		delete(s.groups, topic)
	}
}
