package mongostore

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

var _ event.LeaseRenewer = (*Store)(nil)

// Renew implements [event.LeaseRenewer] with one write to each of the two
// collections involved, whatever the number of partitions, where the
// separate calls make one per partition:
//
//  1. the member's heartbeat, as Heartbeat writes it (a member refused
//     for its tombstone gets the error, and no lease is renewed);
//  2. one UpdateMany of the cursor documents of parts that name member,
//     which sets their expiresAt and keeps their tokens: AcquireLease's
//     first step (a renewal, or a lease of member's that ran out with
//     nobody holding it since), for every partition at once;
//
// then two reads: the cursor documents of parts, whose token is that of
// each lease the update renewed, and the members alive. A partition whose
// document does not name member (taken by another member, released,
// never leased) goes through AcquireLease, which takes it if it is free:
// that happens only after the group's membership changed.
//
// The heartbeat and the leases are not one write: they live in two
// collections, and neither a bulk write over several collections (MongoDB
// 8 only) nor a transaction (which the bundled test server lacks) is
// available on every server the store supports. The heartbeat comes
// first, so that a member that left renews nothing.
func (s *Store) Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) ([]string, []event.LeaseGrant, error) {
	if err := event.CheckRenewParts(parts); err != nil {
		return nil, nil, err
	}
	now := s.cfg.Clock.Now()
	if err := s.beat(ctx, topic, group, member, now, ttl); err != nil {
		return nil, nil, err
	}
	grants := make([]event.LeaseGrant, len(parts))
	if len(parts) > 0 {
		held, err := s.renewHeld(ctx, topic, group, member, now.Add(ttl), parts)
		if err != nil {
			return nil, nil, err
		}
		for i, p := range parts {
			grants[i] = event.LeaseGrant{Partition: p}
			if tok, ok := held[p]; ok {
				grants[i].Token, grants[i].Held = tok, true
				continue
			}
			tok, ok, err := s.AcquireLease(ctx, event.PartitionRef{Topic: topic, Group: group, Partition: p}, member, ttl)
			if err != nil {
				return nil, nil, err
			}
			grants[i].Token, grants[i].Held = tok, ok
		}
	}
	members, err := s.liveMembers(ctx, topic, group, member, now)
	if err != nil {
		return nil, nil, err
	}
	return members, grants, nil
}

// renewHeld extends to until the leases of parts that name member, and
// returns the token of each, by partition.
func (s *Store) renewHeld(ctx context.Context, topic, group, member string, until time.Time, parts []int) (map[int]uint64, error) {
	in := make(bson.A, len(parts))
	for i, p := range parts {
		in[i] = int32(p)
	}
	groupF := bson.D{{Key: "topic", Value: topic}, {Key: "group", Value: group}, {Key: "partition", Value: bson.D{{Key: "$in", Value: in}}}}
	_, err := s.cursors.UpdateMany(ctx, append(groupF, bson.E{Key: fMember, Value: member}),
		bson.D{{Key: "$set", Value: bson.D{{Key: fExpiresAt, Value: until}}}})
	if err != nil {
		return nil, fmt.Errorf("mongostore: renew the leases of %q in %q/%q: %w", member, topic, group, err)
	}
	cur, err := s.cursors.Find(ctx, append(groupF, bson.E{Key: fMember, Value: member}),
		options.Find().SetProjection(bson.D{{Key: "partition", Value: 1}, {Key: fToken, Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("mongostore: read the leases of %q in %q/%q: %w", member, topic, group, err)
	}
	var docs []struct {
		Partition int32 `bson:"partition"`
		Token     int64 `bson:"token"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: read the leases of %q in %q/%q: %w", member, topic, group, err)
	}
	held := make(map[int]uint64, len(docs))
	for _, d := range docs {
		p := event.PartitionRef{Topic: topic, Group: group, Partition: int(d.Partition)}
		tok, _, err := s.granted(p, d.Token)
		if err != nil {
			return nil, err
		}
		held[p.Partition] = tok
	}
	return held, nil
}
