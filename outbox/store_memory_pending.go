package outbox

import (
	"context"
	"maps"
	"slices"
)

var _ PendingLister = (*MemoryStore)(nil)

// PendingRows implements [PendingLister].
func (s *MemoryStore) PendingRows(ctx context.Context) ([]Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Row
	for _, r := range s.rows[s.first:] {
		if r.Status == StatusPending {
			c := *r
			c.Headers, c.Payload = maps.Clone(r.Headers), slices.Clone(r.Payload)
			out = append(out, c)
		}
	}
	return out, nil
}
