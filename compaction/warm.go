package compaction

import (
	"context"
	"fmt"

	"github.com/promethean/promlib/event"
)

// Apply applies one record to a consumer's state.
type Apply func(ctx context.Context, r *event.Record) error

// WarmPage is how many keys Warm reads at once.
const WarmPage = 500

// Warm starts a consumer of a compacted topic from cold: it applies the
// latest record of every key, then subscribes group and applies every
// later record, so that the consumer's state follows the topic with
// nothing missed and nothing applied twice:
//
//   - the topic's head h is read first; every record at or below h is
//     either the latest of its key, and applied during the warm-up, or
//     superseded by one that is;
//   - the group's cursor is set to h, so the subscription delivers every
//     record after h;
//   - a delivered record whose key was already applied at the same or a
//     later seq is acked without applying it.
//
// The state covers keyed records (a compacted topic's); keyless records
// at or below h are not replayed. The group should belong to this
// consumer alone (its cursor is reset): one with live members, in bus or
// in another process, is refused with an error wrapping
// [event.ErrGroupActive]. opts are the subscription's options; apply
// runs on the subscription's handler goroutines (one by default).
func Warm(ctx context.Context, bus *event.Bus, topic, group string, apply Apply, opts ...event.SubscribeOption) (*event.Subscription, error) {
	if bus == nil {
		return nil, invalid("bus", "nil")
	}
	if apply == nil {
		return nil, invalid("apply", "nil")
	}
	ks, ok := bus.Store().(event.KeyStore)
	if !ok {
		return nil, fmt.Errorf("%w: warm-up needs latest-by-key", ErrNotSupported)
	}
	if err := event.ValidateTopic(topic); err != nil {
		return nil, err
	}
	head, err := bus.Store().Head(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("compaction: head of %q: %w", topic, err)
	}
	applied := make(map[string]uint64)
	after := ""
	for {
		page, err := ks.Latest(ctx, topic, after, WarmPage)
		if err != nil {
			return nil, fmt.Errorf("compaction: latest of %q: %w", topic, err)
		}
		if len(page) == 0 {
			break
		}
		for i := range page {
			if err := apply(ctx, &page[i]); err != nil {
				return nil, fmt.Errorf("compaction: warm %q key %q: %w", topic, page[i].Key, err)
			}
			applied[page[i].Key] = page[i].Seq
			after = page[i].Key
		}
	}
	// The group resumes after h. A group with live members anywhere is
	// refused (event.ErrGroupActive): it is not this consumer's alone.
	if _, err := bus.ResetCursor(ctx, topic, group, event.AtSeq(head+1), false); err != nil {
		return nil, err
	}
	// applied is only read from here on.
	return bus.Subscribe(ctx, topic, group, func(ctx context.Context, d *event.Delivery) error {
		if seq, ok := applied[d.Key]; ok && d.Key != "" && d.Seq <= seq {
			return nil // the warm-up applied this or a later record of the key
		}
		return apply(ctx, &d.Record)
	}, opts...)
}
