package event

import (
	"context"
	"slices"
)

// memSettled marks a settled seq in the group state of a MemoryStore;
// other values are attempt counts.
const memSettled = -1

// GroupState implements [GroupStateStore].
func (s *MemoryStore) GroupState(ctx context.Context, p PartitionRef) (GroupState, error) {
	if err := ctx.Err(); err != nil {
		return GroupState{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var st GroupState
	for seq, v := range s.gstate[p] {
		if v == memSettled {
			st.Settled = append(st.Settled, seq)
			continue
		}
		if st.Attempts == nil {
			st.Attempts = make(map[uint64]int)
		}
		st.Attempts[seq] = int(v)
	}
	slices.Sort(st.Settled)
	return st, nil
}

// UpdateGroupState implements [GroupStateStore].
func (s *MemoryStore) UpdateGroupState(ctx context.Context, p PartitionRef, u GroupStateUpdate, f Fence) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for seq, n := range u.Attempts {
		if n < 1 || n > 1<<30 {
			return invalid("Attempts", "seq %d: %d, want 1 to 2^30", seq, n)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkFence(p, f); err != nil {
		return err
	}
	m := s.gstate[p]
	if m == nil {
		if len(u.Attempts) == 0 && len(u.Settled) == 0 {
			return nil
		}
		if s.gstate == nil {
			s.gstate = make(map[PartitionRef]map[uint64]int32)
		}
		m = make(map[uint64]int32, len(u.Attempts)+len(u.Settled))
		s.gstate[p] = m
	}
	for seq, n := range u.Attempts {
		if v, ok := m[seq]; !ok || (v != memSettled && int32(n) > v) {
			m[seq] = int32(n)
		}
	}
	for _, seq := range u.Settled {
		m[seq] = memSettled
	}
	for _, seq := range u.Forget {
		delete(m, seq)
	}
	if len(m) == 0 {
		delete(s.gstate, p)
	}
	return nil
}

// ResetGroupState implements [GroupStateStore].
func (s *MemoryStore) ResetGroupState(ctx context.Context, p PartitionRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.gstate, p)
	return nil
}
