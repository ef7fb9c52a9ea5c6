package event

import (
	"context"
	"fmt"
	"time"
)

// DefaultExpirySweep is how often a Bus looks for groups to expire
// ([Config].ExpirySweep).
const DefaultExpirySweep = time.Minute

// ExpireGroups deletes every group of the store whose settings have an
// expiration policy ([GroupConfig].ExpireAfter) and that has had no live
// member and no cursor commit for that long, with its cursors, state,
// members, leases and settings, and the group's redrive topic cursors. It
// returns the groups it deleted, each logged and counted
// ([Observer].GroupExpired). A Bus runs it every [Config].ExpirySweep;
// call it to sweep at once. It needs a store that is a [Lister] (others
// keep their groups) and sees the topics it lists: those that hold or held
// records.
func (b *Bus) ExpireGroups(ctx context.Context) ([]GroupInfo, error) {
	if b.isClosed() {
		return nil, ErrClosed
	}
	l, ok := b.store.(Lister)
	if !ok {
		return nil, nil
	}
	topics, err := l.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("event: expire groups: list topics: %w", err)
	}
	var gone []GroupInfo
	now := b.clk.Now()
	for _, t := range topics {
		groups, err := l.ListGroups(ctx, t.Topic)
		if err != nil {
			return gone, fmt.Errorf("event: expire groups: list groups of %q: %w", t.Topic, err)
		}
		for _, g := range groups {
			if g.Config == nil || g.Config.ExpireAfter <= 0 || len(g.Members) > 0 {
				continue
			}
			before := now.Add(-g.Config.ExpireAfter).UnixMilli()
			if g.LastActive >= before {
				continue
			}
			done, err := l.ExpireGroup(ctx, t.Topic, g.Group, before)
			if err != nil {
				return gone, fmt.Errorf("event: expire group %q on %q: %w", g.Group, t.Topic, err)
			}
			if !done {
				continue // a member came back, or it was active after all
			}
			if rt := RedriveTopic(t.Topic, g.Group); ValidateTopic(rt) == nil {
				if err := l.DeleteGroup(ctx, rt, g.Group); err != nil {
					b.log.Warn("event: delete the redrive cursors of an expired group failed", "topic", t.Topic, "group", g.Group, "err", err)
				}
			}
			b.log.Info("event: group expired", "topic", t.Topic, "group", g.Group,
				"expire_after", g.Config.ExpireAfter, "last_active", time.UnixMilli(g.LastActive).UTC())
			b.obs.GroupExpired(t.Topic, g.Group)
			gone = append(gone, g)
		}
	}
	return gone, nil
}

// sweepExpired runs ExpireGroups every ExpirySweep until the Bus closes.
func (b *Bus) sweepExpired() {
	defer b.wg.Done()
	base, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		<-b.done
		stop()
	}()
	for {
		t := b.clk.NewTimer(b.cfg.ExpirySweep)
		select {
		case <-b.done:
			t.Stop()
			return
		case <-t.C():
		}
		ctx, cancel := context.WithTimeout(base, b.cfg.ExpirySweep)
		if _, err := b.ExpireGroups(ctx); err != nil && !b.isClosed() {
			b.log.Warn("event: group expiry sweep failed", "err", err)
		}
		cancel()
	}
}
