package sqloutbox

import (
	"context"

	"github.com/promethean/promlib/outbox"
)

var _ outbox.PendingLister = (*Store)(nil)

// PendingRows implements [outbox.PendingLister].
func (s *Store) PendingRows(ctx context.Context) ([]outbox.Row, error) {
	c, _, err := s.src.Conn(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.rows(ctx, c, `SELECT `+rowCols+` FROM `+s.t+` WHERE status = 'pending' ORDER BY seq`)
	if err != nil {
		return nil, s.errorf("pending rows: %w", err)
	}
	return rows, nil
}
