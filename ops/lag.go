package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/promethean/promlib/event"
)

// lag returns the lag of group on topic (see [event.Bus.LagAt]); a group
// without a cursor gives an error wrapping [ErrNotFound].
func (h *Handler) lag(ctx context.Context, topic, group string) (event.GroupLag, error) {
	l, err := h.bus.LagAt(ctx, topic, group, h.cfg.Clock.Now())
	if errors.Is(err, event.ErrNotFound) {
		return event.GroupLag{}, fmt.Errorf("%w: group %q has no cursor on topic %q", ErrNotFound, group, topic)
	}
	return l, err
}
