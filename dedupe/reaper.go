package dedupe

import (
	"context"
	"log/slog"
	"time"
)

// RunReaper deletes expired keys from s every interval until ctx ends.
// Expired keys never count as seen, reaped or not; reaping only bounds the
// store's size on servers without TTL indexes. It returns nil when ctx ends.
func RunReaper(ctx context.Context, s Store, interval time.Duration, log *slog.Logger) error {
	if interval <= 0 {
		return invalid("interval", "%v, want a positive duration", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if n, err := s.Reap(ctx); err != nil && ctx.Err() == nil && log != nil {
				log.Warn("dedupe: reap failed", "err", err)
			} else if n > 0 && log != nil {
				log.Debug("dedupe: reaped expired keys", "n", n)
			}
		}
	}
}
