package mongooutbox

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/outbox"
)

var _ outbox.PendingLister = (*Store)(nil)

// PendingRows implements [outbox.PendingLister], in the order the rows
// were added (their order field).
func (s *Store) PendingRows(ctx context.Context) ([]outbox.Row, error) {
	cur, err := s.rows.Find(ctx, bson.D{{Key: "status", Value: outbox.StatusPending}}, options.Find().SetSort(bson.D{{Key: "order", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("outbox: pending rows: %w", err)
	}
	var docs []mongoRow
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("outbox: pending rows: %w", err)
	}
	out := make([]outbox.Row, len(docs))
	for i := range docs {
		out[i] = docs[i].row()
	}
	return out, nil
}
