package mongostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

// Documents of the cursors, members and leases collections:
//
//	cursors {topic, group, partition: int32, seq: int64}
//	members {topic, group, member, expiresAt: date, left: bool, leftAt: date}
//	leases  {topic, group, partition: int32, member, expiresAt: date}
//
// Expiry times come from the clock of the process that writes them, so the
// clocks of the processes sharing a group must agree to well within the
// Bus's LeaseTTL. Expired members are deleted by the next heartbeat of
// their group and expired leases are taken over in place, so the store
// needs no TTL index.
//
// Leave does not delete a member's document: it marks it left at its
// time (a tombstone, kept for leftKeep). A heartbeat the member sent before
// it left may still be applied by the server after Leave (its caller gave
// up on it, the server did not): stamped no later than the Leave, it
// matches no document, its insert fails on the unique index, and the member
// stays gone instead of holding a share of the partitions as a ghost for a
// lease TTL. A heartbeat stamped after the Leave (a process that restarted
// with the same member id) brings the member back.

type cursorDoc struct {
	Partition int32 `bson:"partition"`
	Seq       int64 `bson:"seq"`
}

func cursorFilter(p event.PartitionRef) bson.D {
	return bson.D{{Key: "topic", Value: p.Topic}, {Key: "group", Value: p.Group}, {Key: "partition", Value: int32(p.Partition)}}
}

func checkPartition(p int) error {
	if p < 0 || p > 1<<31-1 {
		return invalid("partition", "%d, want 0 to 2^31-1", p)
	}
	return nil
}

// Cursors implements [event.CursorStore].
func (s *Store) Cursors(ctx context.Context, topic, group string) (map[int]uint64, error) {
	cur, err := s.cursors.Find(ctx, bson.D{{Key: "topic", Value: topic}, {Key: "group", Value: group}})
	if err != nil {
		return nil, fmt.Errorf("mongostore: cursors of %q/%q: %w", topic, group, err)
	}
	var docs []cursorDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: cursors of %q/%q: %w", topic, group, err)
	}
	out := make(map[int]uint64, len(docs))
	for _, d := range docs {
		if d.Seq < 0 || d.Partition < 0 {
			return nil, fmt.Errorf("%w: cursor of %q/%q partition %d: seq %d", ErrBadDocument, topic, group, d.Partition, d.Seq)
		}
		out[int(d.Partition)] = uint64(d.Seq)
	}
	return out, nil
}

// CommitCursor implements [event.CursorStore] with an upsert that uses
// $max, so a commit never moves a cursor back.
func (s *Store) CommitCursor(ctx context.Context, p event.PartitionRef, seq uint64) error {
	return s.writeCursor(ctx, p, seq, "$max")
}

// SetCursor implements [event.CursorStore].
func (s *Store) SetCursor(ctx context.Context, p event.PartitionRef, seq uint64) error {
	return s.writeCursor(ctx, p, seq, "$set")
}

func (s *Store) writeCursor(ctx context.Context, p event.PartitionRef, seq uint64, op string) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	v, err := seqValue(seq)
	if err != nil {
		return err
	}
	if err := s.knowGroup(ctx, p.Topic, p.Group); err != nil {
		return err
	}
	update := bson.D{{Key: op, Value: bson.D{{Key: "seq", Value: v}}}}
	err = upsert(ctx, s.cursors, cursorFilter(p), update)
	if err != nil {
		return fmt.Errorf("mongostore: commit cursor of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}

// upsert runs an upsert, once more if it raced with another upsert of the
// same document (both tried to insert it).
func upsert(ctx context.Context, c *mongo.Collection, filter, update bson.D) error {
	opts := options.UpdateOne().SetUpsert(true)
	_, err := c.UpdateOne(ctx, filter, update, opts)
	if mongo.IsDuplicateKeyError(err) {
		_, err = c.UpdateOne(ctx, filter, update, opts)
	}
	return err
}

type memberDoc struct {
	Member    string    `bson:"member"`
	ExpiresAt time.Time `bson:"expiresAt"`
	Left      bool      `bson:"left"`
}

// leftKeep is how long the tombstone of a member that left is kept: far
// longer than a write of its can be in flight.
const leftKeep = 10 * time.Minute

// errLeft is returned by the heartbeat of a member that has left.
var errLeft = errors.New("the member has left the group")

func memberFilter(topic, group, member string) bson.D {
	return bson.D{{Key: "topic", Value: topic}, {Key: "group", Value: group}, {Key: "member", Value: member}}
}

// Heartbeat implements [event.LeaseStore].
func (s *Store) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	now := s.cfg.Clock.Now()
	notLeft := bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "left", Value: bson.D{{Key: "$ne", Value: true}}}},
		bson.D{{Key: "leftAt", Value: bson.D{{Key: "$lt", Value: now}}}},
	}}
	err := upsert(ctx, s.members, append(memberFilter(topic, group, member), notLeft),
		bson.D{{Key: "$set", Value: bson.D{{Key: "expiresAt", Value: now.Add(ttl)}, {Key: "left", Value: false}}}})
	if mongo.IsDuplicateKeyError(err) {
		err = errLeft // only the member's tombstone is in the way
	}
	if err != nil {
		return nil, fmt.Errorf("mongostore: heartbeat of %q in %q/%q: %w", member, topic, group, err)
	}
	groupF := bson.D{{Key: "topic", Value: topic}, {Key: "group", Value: group}}
	cur, err := s.members.Find(ctx, groupF, options.Find().SetProjection(bson.D{{Key: "member", Value: 1}, {Key: "expiresAt", Value: 1}, {Key: "left", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("mongostore: members of %q/%q: %w", topic, group, err)
	}
	var docs []memberDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: members of %q/%q: %w", topic, group, err)
	}
	live := make([]string, 0, len(docs))
	expired := false
	for _, d := range docs {
		if d.Left {
			expired = expired || !d.ExpiresAt.After(now)
			continue
		}
		if d.ExpiresAt.After(now) || d.Member == member {
			live = append(live, d.Member)
		} else {
			expired = true
		}
	}
	slices.Sort(live)
	if expired {
		_, err := s.members.DeleteMany(ctx, append(groupF, bson.E{Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: now}}}))
		if err != nil {
			s.log.Warn("mongostore: delete expired members failed", "topic", topic, "group", group, "err", err)
		}
	}
	return live, nil
}

// Leave implements [event.LeaseStore]: the member's document becomes its
// tombstone, which fences off a heartbeat of its applied later.
func (s *Store) Leave(ctx context.Context, topic, group, member string) error {
	now := s.cfg.Clock.Now()
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "left", Value: true}, {Key: "leftAt", Value: now}, {Key: "expiresAt", Value: now.Add(leftKeep)}}}}
	if err := upsert(ctx, s.members, memberFilter(topic, group, member), update); err != nil {
		return fmt.Errorf("mongostore: leave %q/%q as %q: %w", topic, group, member, err)
	}
	return nil
}

// AcquireLease implements [event.LeaseStore] with one conditional upsert:
// the lease document is updated when it is the member's own or expired,
// inserted when there is none, and otherwise the insert fails on the
// unique index: the lease is held by another member.
func (s *Store) AcquireLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (bool, error) {
	if err := checkPartition(p.Partition); err != nil {
		return false, err
	}
	now := s.cfg.Clock.Now()
	filter := append(cursorFilter(p), bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "member", Value: member}},
		bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: now}}}},
	}})
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "member", Value: member}, {Key: "expiresAt", Value: now.Add(ttl)}}}}
	_, err := s.leases.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
	if mongo.IsDuplicateKeyError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mongostore: lease %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return true, nil
}

// ReleaseLease implements [event.LeaseStore].
func (s *Store) ReleaseLease(ctx context.Context, p event.PartitionRef, member string) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	_, err := s.leases.DeleteOne(ctx, append(cursorFilter(p), bson.E{Key: "member", Value: member}))
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("mongostore: release %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}
