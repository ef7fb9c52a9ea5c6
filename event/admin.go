package event

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ResetResult says what [Bus.ResetCursor] did.
type ResetResult struct {
	Topic string   `json:"topic"`
	Group string   `json:"group"`
	To    Position `json:"to"`
	// Seq is the committed cursor now, in every partition: the group
	// resumes after it.
	Seq uint64 `json:"seq"`
	// Previous is each partition's committed cursor before the reset.
	Previous map[int]uint64 `json:"previous"`
	// Members are the live members the reset moved (with force).
	Members []string `json:"members"`
}

// ResetCursor moves group on topic to the position to in every
// partition: its next delivery is the first record after it (to seq:N
// delivers N next, latest only what is published from now). What the
// group knew of the records above its cursors (settled out of order,
// attempts) is forgotten. A group with live members, in this process or
// another, is refused (an error wrapping ErrGroupActive) unless force is
// set. With force the members are moved wherever they run: the reset
// takes each partition's lease from its holder ([LeaseStore.TakeLease]),
// so no member writes while the cursor moves, and gives it back; each
// member gives up the partition's deliveries in flight (their acks are
// refused with ErrStaleAck, their handlers are not stopped) and takes the
// partition again from the new cursor, at once in this process and at
// its next lease renewal in others ([Config].LeaseTTL/3).
//
// A reset that fails midway (the store failed) leaves some partitions
// moved and the others as they were; their taken leases run out after
// LeaseTTL. Reset again.
func (b *Bus) ResetCursor(ctx context.Context, topic, group string, to Position, force bool) (ResetResult, error) {
	res := ResetResult{Topic: topic, Group: group, To: to}
	if b.isClosed() {
		return res, ErrClosed
	}
	if err := errors.Join(ValidateTopic(topic), ValidateGroup(group), to.Validate()); err != nil {
		return res, err
	}
	members, err := b.liveMembers(ctx, topic, group)
	if err != nil {
		return res, err
	}
	if len(members) > 0 && !force {
		return res, fmt.Errorf("%w: group %q on %q has live members %v: stop them, or force the reset to move them", ErrGroupActive, group, topic, members)
	}
	res.Members = members
	if res.Members == nil {
		res.Members = []string{}
	}
	if res.Seq, err = b.resolve(ctx, topic, to); err != nil {
		return res, err
	}
	if res.Previous, err = b.cfg.Cursors.Cursors(ctx, topic, group); err != nil {
		return res, fmt.Errorf("event: read cursor of group %q on %q: %w", group, topic, err)
	}
	n, err := b.partitionsOf(ctx, topic)
	if err != nil {
		return res, err
	}
	// The reset holds each partition under a member name of its own while
	// it moves the cursor; the lease outlives a slow store call.
	op := "reset/" + uuid.NewString()
	ttl := max(b.cfg.LeaseTTL, 10*time.Second)
	for p := 0; p < n; p++ {
		ref := PartitionRef{Topic: topic, Group: group, Partition: p}
		if err := b.resetPartition(ctx, ref, op, ttl, res.Seq); err != nil {
			return res, err
		}
	}
	b.resyncGroup(topic, group)
	return res, nil
}

// resetPartition moves the cursor of p to seq under a lease taken from
// whoever holds it, and releases the lease.
func (b *Bus) resetPartition(ctx context.Context, p PartitionRef, op string, ttl time.Duration, seq uint64) error {
	if _, err := b.cfg.Leases.TakeLease(ctx, p, op, ttl); err != nil {
		return fmt.Errorf("event: reset partition %d of group %q on %q: take its lease: %w", p.Partition, p.Group, p.Topic, err)
	}
	if err := b.cfg.GroupState.ResetGroupState(ctx, p); err != nil {
		return fmt.Errorf("event: reset partition %d of group %q on %q: forget its state: %w", p.Partition, p.Group, p.Topic, err)
	}
	if err := b.cfg.Cursors.SetCursor(ctx, p, seq); err != nil {
		return fmt.Errorf("event: reset partition %d of group %q on %q: %w", p.Partition, p.Group, p.Topic, err)
	}
	if err := b.cfg.Leases.ReleaseLease(ctx, p, op); err != nil {
		return fmt.Errorf("event: reset partition %d of group %q on %q: release its lease: %w", p.Partition, p.Group, p.Topic, err)
	}
	return nil
}

// resyncGroup makes this Bus's member of group on topic renew its leases
// now: it finds them taken over and takes its partitions afresh.
func (b *Bus) resyncGroup(topic, group string) {
	b.mu.Lock()
	g := b.groups[groupKey{topic, group}]
	b.mu.Unlock()
	if g != nil {
		g.resync.Store(true)
		g.signal()
	}
}
