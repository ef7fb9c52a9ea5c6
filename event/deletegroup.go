package event

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ErrNotSupported is returned by a call that needs more of the store
// than it implements, such as [Bus.DeleteGroup] over a store that is not
// a [Lister].
var ErrNotSupported = errors.New("event: not supported by the store")

// DeleteGroup deletes group on topic from the store: its cursors, group
// state, leases, members and settings ([Lister.DeleteGroup]), and its
// cursors on its redrive topic ([RedriveTopic]). It is no longer listed,
// and a subscriber that comes later creates it afresh, at the start
// position it asks for. Its dead letters stay in its dead-letter topic.
//
// A group with live members, in this process or another, is refused (an
// error wrapping ErrGroupActive, naming them) unless force is set. With
// force the delete first takes each partition's lease from its holder
// ([LeaseStore.TakeLease], as a forced [Bus.ResetCursor] does), so that
// no member writes the group's cursor or state while it is deleted; a
// member gives up the partition's deliveries in flight (their acks are
// refused where the store's new lease tokens tell it the partition was
// taken). A member that is still running afterwards takes the partitions
// again at its next lease renewal and so brings the group back, without
// its settings, from where it was or from the start it knows, and may
// deliver again what it had delivered: stop the members (close their
// subscriptions) to delete a group for good; force is for members that
// cannot be stopped, such as a process that died and whose membership has
// not expired yet.
//
// It needs a store that is a Lister (an error wrapping ErrNotSupported
// otherwise). Deleting a group that is not known is no error.
func (b *Bus) DeleteGroup(ctx context.Context, topic, group string, force bool) error {
	if b.isClosed() {
		return ErrClosed
	}
	if err := errors.Join(ValidateTopic(topic), ValidateGroup(group)); err != nil {
		return err
	}
	l, ok := b.store.(Lister)
	if !ok {
		return fmt.Errorf("%w: deleting a group needs a store that implements event.Lister", ErrNotSupported)
	}
	members, err := b.liveMembers(ctx, topic, group)
	if err != nil {
		return err
	}
	if len(members) > 0 && !force {
		return fmt.Errorf("%w: group %q on %q has live members %v: stop them, or force the delete", ErrGroupActive, group, topic, members)
	}
	op := "delete/" + uuid.NewString()
	var taken []PartitionRef
	if force {
		if taken, err = b.takeGroup(ctx, topic, group, op); err != nil {
			for _, ref := range taken {
				_ = b.cfg.Leases.ReleaseLease(ctx, ref, op)
			}
			return err
		}
	}
	if err := l.DeleteGroup(ctx, topic, group); err != nil {
		return fmt.Errorf("event: delete group %q of %q: %w", group, topic, err)
	}
	if rt := RedriveTopic(topic, group); ValidateTopic(rt) == nil {
		if err := l.DeleteGroup(ctx, rt, group); err != nil {
			return fmt.Errorf("event: delete group %q of %q: %w", group, rt, err)
		}
	}
	for _, ref := range taken {
		// Gone with the group in the store; released for a LeaseStore
		// apart from the Lister.
		if err := b.cfg.Leases.ReleaseLease(ctx, ref, op); err != nil {
			return fmt.Errorf("event: delete group %q of %q: release the lease of partition %d: %w", group, topic, ref.Partition, err)
		}
	}
	return nil
}

// takeGroup takes the lease of every partition of group on topic from
// whoever holds it, for the member name op, so that no member writes the
// group's cursors or state until the leases end; it returns the
// partitions taken.
func (b *Bus) takeGroup(ctx context.Context, topic, group, op string) ([]PartitionRef, error) {
	cur, err := b.cfg.Cursors.Cursors(ctx, topic, group)
	if err != nil {
		return nil, fmt.Errorf("event: read cursor of group %q on %q: %w", group, topic, err)
	}
	n, err := b.knownPartitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	for p := range cur {
		n = max(n, p+1)
	}
	// The lease outlives a slow store call.
	ttl := max(b.cfg.LeaseTTL, 10*time.Second)
	taken := make([]PartitionRef, 0, n)
	for p := 0; p < n; p++ {
		ref := PartitionRef{Topic: topic, Group: group, Partition: p}
		if _, err := b.cfg.Leases.TakeLease(ctx, ref, op, ttl); err != nil {
			return taken, fmt.Errorf("event: delete group %q of %q: take the lease of partition %d: %w", group, topic, p, err)
		}
		taken = append(taken, ref)
	}
	return taken, nil
}
