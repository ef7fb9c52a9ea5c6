package schema

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"
)

// Version is one version of a topic's schema.
type Version struct {
	Topic string `json:"topic"`
	// Version counts from 1 per topic.
	Version int `json:"version"`
	// Schema is the JSON Schema document (draft 2020-12).
	Schema json.RawMessage `json:"schema"`
	// Rule is the evolution rule in force from this version on: the next
	// version is checked against this one under it.
	Rule Rule `json:"rule"`
	// Created is when it was registered.
	Created time.Time `json:"created"`
}

// Store keeps the versions of every topic's schema. Versions are never
// changed nor removed. A store shared by processes makes Add atomic per
// (topic, version): of two writers adding the same version, one gets
// [ErrVersionExists].
//
// A database implementation is a table with the primary key (topic,
// version) and the columns of [Version]; [schematest.Run] is its
// conformance suite.
type Store interface {
	// Add stores v, or returns an error matching [ErrVersionExists] when
	// the topic already has v.Version.
	Add(ctx context.Context, v Version) error
	// Versions returns the versions of topic, oldest first; none is not
	// an error.
	Versions(ctx context.Context, topic string) ([]Version, error)
	// All returns every version of every topic, by topic then version.
	All(ctx context.Context) ([]Version, error)
}

// MemoryStore is a [Store] in memory.
type MemoryStore struct {
	mu sync.Mutex
	vs map[string][]Version
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{vs: map[string][]Version{}} }

// Add implements [Store].
func (s *MemoryStore) Add(ctx context.Context, v Version) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.vs[v.Topic] {
		if o.Version == v.Version {
			return ErrVersionExists
		}
	}
	v.Schema = slices.Clone(v.Schema)
	vs := append(s.vs[v.Topic], v)
	slices.SortFunc(vs, func(a, b Version) int { return a.Version - b.Version })
	s.vs[v.Topic] = vs
	return nil
}

// Versions implements [Store].
func (s *MemoryStore) Versions(ctx context.Context, topic string) ([]Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneVersions(s.vs[topic]), nil
}

// All implements [Store].
func (s *MemoryStore) All(ctx context.Context) ([]Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Version
	for _, vs := range s.vs {
		out = append(out, cloneVersions(vs)...)
	}
	SortVersions(out)
	return out, nil
}

// SortVersions sorts vs by topic, then version.
func SortVersions(vs []Version) {
	slices.SortFunc(vs, func(a, b Version) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return a.Version - b.Version
	})
}

func cloneVersions(vs []Version) []Version {
	out := make([]Version, len(vs))
	for i, v := range vs {
		v.Schema = slices.Clone(v.Schema)
		out[i] = v
	}
	return out
}
