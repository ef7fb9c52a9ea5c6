package event

import (
	"context"
	"fmt"
	"time"
)

// CreateGroup implements [GroupStore].
func (s *MemoryStore) CreateGroup(ctx context.Context, topic, group string, cfg GroupConfig) (GroupConfig, bool, error) {
	if err := ctx.Err(); err != nil {
		return GroupConfig{}, false, err
	}
	if err := cfg.Validate(); err != nil {
		return GroupConfig{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.group(topic, group)
	if g.cfg != nil {
		return *g.cfg, false, nil
	}
	g.cfg = &cfg
	g.touch(s.clock.Now())
	return cfg, true, nil
}

// GroupConfig implements [GroupStore].
func (s *MemoryStore) GroupConfig(ctx context.Context, topic, group string) (GroupConfig, error) {
	if err := ctx.Err(); err != nil {
		return GroupConfig{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if g := s.groups[topic][group]; g != nil && g.cfg != nil {
		return *g.cfg, nil
	}
	return GroupConfig{}, fmt.Errorf("%w: settings of group %q on topic %q", ErrNotFound, group, topic)
}

// UpdateGroup implements [GroupStore].
func (s *MemoryStore) UpdateGroup(ctx context.Context, topic, group string, cfg GroupConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[topic][group]
	if g == nil || g.cfg == nil {
		return fmt.Errorf("%w: settings of group %q on topic %q", ErrNotFound, group, topic)
	}
	g.cfg = &cfg
	return nil
}

// TakeLease implements [LeaseStore].
func (s *MemoryStore) TakeLease(ctx context.Context, p PartitionRef, member string, ttl time.Duration) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaseTok++
	s.leases[p] = memLease{member: member, expires: s.clock.Now().Add(ttl), token: s.leaseTok}
	return s.leaseTok, nil
}

// ExpireGroup implements [Lister].
func (s *MemoryStore) ExpireGroup(ctx context.Context, topic, group string, before int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[topic][group]
	if g == nil {
		return false, nil
	}
	now := s.clock.Now()
	for _, exp := range s.members[groupKey{topic, group}] {
		if exp.After(now) {
			return false, nil
		}
	}
	if g.active >= before {
		return false, nil
	}
	s.deleteGroup(topic, group, g)
	return true, nil
}
