package dedupe

import (
	"context"
	"log/slog"
	"time"

	"github.com/promethean/promlib/clock"
)

// ReaperConfig configures [RunReaper].
type ReaperConfig struct {
	// Interval is the time between two reaps; it must be positive.
	Interval time.Duration
	// Logger receives failed reaps; nil means discard.
	Logger *slog.Logger
	// Clock arms the interval timer; nil means the system clock.
	Clock clock.Clock
}

// RunReaper deletes expired keys from s every cfg.Interval until ctx
// ends. Expired keys never count as seen, reaped or not; reaping only
// bounds the store's size on servers without TTL indexes. It returns nil
// when ctx ends.
func RunReaper(ctx context.Context, s Store, cfg ReaperConfig) error {
	if s == nil {
		return invalid("store", "nil")
	}
	if cfg.Interval <= 0 {
		return invalid("Interval", "%v, want a positive duration", cfg.Interval)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := clock.Or(cfg.Clock).NewTimer(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if n, err := s.Reap(ctx); err != nil && ctx.Err() == nil {
				log.Warn("dedupe: reap failed", "err", err)
			} else if n > 0 {
				log.Debug("dedupe: reaped expired keys", "n", n)
			}
			t.Reset(cfg.Interval)
		}
	}
}
