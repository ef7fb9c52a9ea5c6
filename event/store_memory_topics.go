package event

import (
	"context"
	"fmt"
)

var _ TopicStore = (*MemoryStore)(nil)

// CreateTopic implements [TopicStore].
func (s *MemoryStore) CreateTopic(ctx context.Context, topic string, cfg TopicConfig) (TopicConfig, bool, error) {
	if err := ctx.Err(); err != nil {
		return TopicConfig{}, false, err
	}
	if err := cfg.Validate(); err != nil {
		return TopicConfig{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.topicCfg[topic]; ok {
		return c, false, nil
	}
	// Records and cursors of the topic from before it had settings (only
	// records appended straight to the store, in a memory store) show how
	// many partitions it had.
	n := cfg.Partitions
	if t := s.topics[topic]; t != nil {
		for i, c := range t.chunks {
			for j := range c {
				if seq := uint64(i*memChunk + j + 1); seq <= t.head && !c[j].deleted {
					n = max(n, int(c[j].partition)+1)
				}
			}
		}
	}
	for ref := range s.cursors {
		if ref.Topic == topic {
			n = max(n, ref.Partition+1)
		}
	}
	c := TopicConfig{Partitions: n}
	if s.topicCfg == nil {
		s.topicCfg = make(map[string]TopicConfig)
	}
	s.topicCfg[topic] = c
	return c, true, nil
}

// Topic implements [TopicStore].
func (s *MemoryStore) Topic(ctx context.Context, topic string) (TopicConfig, error) {
	if err := ctx.Err(); err != nil {
		return TopicConfig{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.topicCfg[topic]
	if !ok {
		return TopicConfig{}, fmt.Errorf("%w: settings of topic %q", ErrNotFound, topic)
	}
	return c, nil
}

// AddPartitions implements [TopicStore].
func (s *MemoryStore) AddPartitions(ctx context.Context, topic string, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.topicCfg[topic]
	if !ok {
		return fmt.Errorf("%w: settings of topic %q", ErrNotFound, topic)
	}
	if err := c.CheckGrow(topic, n); err != nil {
		return err
	}
	s.topicCfg[topic] = TopicConfig{Partitions: n}
	return nil
}
