package metrics

import "sync"

// OtherLabel is the topic or group label value of the topics and groups
// beyond [Config.MaxTopics] and [Config.MaxGroups]. It is not a valid topic
// or group name, so it never mixes with a real one.
const OtherLabel = "~other"

// labelSet admits up to max distinct label values; the others become
// OtherLabel.
type labelSet struct {
	max  int
	mu   sync.RWMutex
	seen map[string]struct{}
}

func newLabelSet(max int) *labelSet {
	return &labelSet{max: max, seen: make(map[string]struct{})}
}

func (l *labelSet) value(v string) string {
	l.mu.RLock()
	_, ok := l.seen[v]
	full := len(l.seen) >= l.max
	l.mu.RUnlock()
	switch {
	case ok:
		return v
	case full:
		return OtherLabel
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[v]; ok {
		return v
	}
	if len(l.seen) >= l.max {
		return OtherLabel
	}
	l.seen[v] = struct{}{}
	return v
}

// pair is a (topic, group) label pair.
type pair struct{ topic, group string }
