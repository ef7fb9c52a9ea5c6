package mongostore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

// Documents of the cursors and members collections:
//
//	cursors {topic, group, partition: int32, seq: int64, committedAt: date,
//	         member, expiresAt: date, token: int64}
//	members {topic, group, member, expiresAt: date, left: bool, leftAt: date}
//
// The cursor document of a partition holds both its committed cursor
// (seq) and its lease (member, expiresAt, token), so that a fenced cursor
// commit is one conditional update of one document: its filter names the
// fence's member and token and expiresAt > now, and $max raises seq.
// MongoDB applies the filter and the update of one document as one step,
// so a grant of the lease to another member, an update of the same
// document, comes wholly before the commit (which then matches nothing
// and is refused) or wholly after it. A commit whose filter matches is
// applied even when $max leaves seq as it was (a seq not above the stored
// one is no error); one whose filter matches nothing is refused with
// [event.FenceError]. Either half of a document may be missing:
// AcquireLease makes the document of a partition that has no cursor yet
// (Cursors skips a document without seq), and a cursor committed by an
// operator or before the partition was ever leased has no member.
//
// token counts the holdings of the partition. A grant to the member the
// document names (a renewal, or a lease that ran out with nobody taking
// it since) keeps it; any other grant takes the lease and raises the
// token with $inc in the same conditional update, so a first grant (an
// insert) gets 1. ReleaseLease keeps the document, marks it released
// (member "", expiresAt the Unix epoch) and raises the token too, so that
// the next grant, to any member, gets a greater one. TakeLease (an
// operator's take of a partition, whoever holds it) sets the member and
// raises the token in one update of the document too. Only DeleteGroup
// (and ExpireGroup), which delete the documents, start the tokens of a
// group over.
//
// committedAt is the time of the latest cursor write (CommitCursor,
// SetCursor), raised with $max by the update that writes seq: the commit
// path takes no extra round trip for it. A commit that leaves seq as it
// was raises it too (the Bus commits only a higher seq). It is the
// cursors' share of a group's LastActive (see groupsettings.go); a cursor
// document of an older release has none until EnsureIndexes gives it the
// time of the migration.
//
// Versions before fencing kept leases in documents of their own, in the
// leases collection (LeasesCollection), and cursor documents with only
// seq. A cursor document of theirs is used as it is: it has no lease, so
// the first grant takes it and gets token 1, and seq stays. Their lease
// documents are not read any more: a lease lasts seconds, so nothing of
// them needs to move, and the collection can be dropped once no process of
// such a version runs. Until then, a process of the old version and one of
// this version do not see each other's leases and can hold a partition at
// the same time: records are delivered twice while both run, none is
// lost (each commits only what it settled, with $max). Stop the old
// processes of a group before starting new ones to avoid that.
//
// Expiry times come from the store's clock (Config.Clock) in the process
// that writes them, so the clocks of the processes sharing a group must
// agree to well within the Bus's LeaseTTL. Expired members are deleted by
// the next heartbeat of their group and expired leases are taken over in
// place, so the store needs no TTL index.
//
// Leave does not delete a member's document: it marks it left at its
// time (a tombstone, kept for leftKeep). A heartbeat the member sent before
// it left may still be applied by the server after Leave (its caller gave
// up on it, the server did not): stamped no later than the Leave, it
// matches no document, its insert fails on the unique index, and the member
// stays gone instead of holding a share of the partitions as a ghost for a
// lease TTL. A heartbeat stamped after the Leave (a process that restarted
// with the same member id) brings the member back.

// Fields of the lease in a cursor document, and of its commit time.
const (
	fMember      = "member"
	fExpiresAt   = "expiresAt"
	fToken       = "token"
	fCommittedAt = "committedAt"
)

// releasedAt is the expiresAt of a released lease.
var releasedAt = time.Unix(0, 0).UTC()

// cursorDoc is a cursor document as Cursors and ListGroups read it. Seq
// is nil in the document of a partition that is leased but has no cursor.
type cursorDoc struct {
	Group       string    `bson:"group"`
	Partition   int32     `bson:"partition"`
	Seq         *int64    `bson:"seq"`
	Member      string    `bson:"member"`
	ExpiresAt   time.Time `bson:"expiresAt"`
	CommittedAt time.Time `bson:"committedAt"`
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
	cur, err := s.cursors.Find(ctx, bson.D{{Key: "topic", Value: topic}, {Key: "group", Value: group}},
		options.Find().SetProjection(bson.D{{Key: "partition", Value: 1}, {Key: "seq", Value: 1}, {Key: fID, Value: 0}}))
	if err != nil {
		return nil, fmt.Errorf("mongostore: cursors of %q/%q: %w", topic, group, err)
	}
	var docs []cursorDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: cursors of %q/%q: %w", topic, group, err)
	}
	out := make(map[int]uint64, len(docs))
	for _, d := range docs {
		if d.Seq == nil {
			continue // leased, no cursor yet
		}
		if *d.Seq < 0 || d.Partition < 0 {
			return nil, fmt.Errorf("%w: cursor of %q/%q partition %d: seq %d", ErrBadDocument, topic, group, d.Partition, *d.Seq)
		}
		out[int(d.Partition)] = uint64(*d.Seq)
	}
	return out, nil
}

// CommitCursor implements [event.CursorStore] with one update that raises
// seq with $max, so a commit never moves a cursor back. A commit without
// a fence is an upsert; a fenced one updates the partition's document
// only while it holds the fence's live lease (see the documents above),
// and creates none: a partition that has a lease has a document.
func (s *Store) CommitCursor(ctx context.Context, p event.PartitionRef, seq uint64, f event.Fence) error {
	if f.IsZero() {
		return s.writeCursor(ctx, p, seq, "$max")
	}
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	v, err := seqValue(seq)
	if err != nil {
		return err
	}
	filter, ok := s.fenceFilter(p, f)
	if !ok {
		return event.FenceError(p, f)
	}
	if err := s.knowGroup(ctx, p.Topic, p.Group); err != nil {
		return err
	}
	r, err := s.cursors.UpdateOne(ctx, filter, bson.D{{Key: "$max", Value: bson.D{
		{Key: "seq", Value: v}, {Key: fCommittedAt, Value: s.cfg.Clock.Now()},
	}}})
	if err != nil {
		return fmt.Errorf("mongostore: commit cursor of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	if r.MatchedCount == 0 {
		return event.FenceError(p, f)
	}
	return nil
}

// fenceFilter returns the filter that matches the cursor document of p
// while f's lease on p is live by the store's clock, and false for a
// fence that no lease can have (token 0, or beyond int64).
func (s *Store) fenceFilter(p event.PartitionRef, f event.Fence) (bson.D, bool) {
	if f.Token == 0 || f.Token > math.MaxInt64 {
		return nil, false
	}
	return append(cursorFilter(p),
		bson.E{Key: fMember, Value: f.Member},
		bson.E{Key: fToken, Value: int64(f.Token)},
		bson.E{Key: fExpiresAt, Value: bson.D{{Key: "$gt", Value: s.cfg.Clock.Now()}}},
	), true
}

// SetCursor implements [event.CursorStore].
func (s *Store) SetCursor(ctx context.Context, p event.PartitionRef, seq uint64) error {
	return s.writeCursor(ctx, p, seq, "$set")
}

// writeCursor upserts the cursor of p with op ($max or $set) on seq,
// raising its commit time, and leaves the lease fields of the document as
// they are.
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
	at := bson.E{Key: fCommittedAt, Value: s.cfg.Clock.Now()}
	var update bson.D
	if op == "$max" {
		update = bson.D{{Key: "$max", Value: bson.D{{Key: "seq", Value: v}, at}}}
	} else {
		update = bson.D{{Key: op, Value: bson.D{{Key: "seq", Value: v}}}, {Key: "$max", Value: bson.D{at}}}
	}
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

// Heartbeat implements [event.LeaseStore]. The member's document is
// upserted by a FindOneAndUpdate that returns it as it was: a member that
// was not live before (no document, expired, or left) joins, and its
// expiry is also raised into the active field of the group's settings
// (see groupsettings.go), one more round trip on a join only. So
// ExpireGroup, whose last check is on that field, does not delete a group
// that a member joined after it read the members (unless the join lands
// between that check and the deletion of the members).
func (s *Store) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	now := s.cfg.Clock.Now()
	if err := s.beat(ctx, topic, group, member, now, ttl); err != nil {
		return nil, err
	}
	return s.liveMembers(ctx, topic, group, member, now)
}

// beat is the write of Heartbeat: member alive until now+ttl, unless its
// tombstone is not older than now.
func (s *Store) beat(ctx context.Context, topic, group, member string, now time.Time, ttl time.Duration) error {
	notLeft := bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "left", Value: bson.D{{Key: "$ne", Value: true}}}},
		bson.D{{Key: "leftAt", Value: bson.D{{Key: "$lt", Value: now}}}},
	}}
	var was memberDoc
	var err error
	for range 2 { // again once if it raced with another insert of the document
		err = s.members.FindOneAndUpdate(ctx, append(memberFilter(topic, group, member), notLeft),
			bson.D{{Key: "$set", Value: bson.D{{Key: "expiresAt", Value: now.Add(ttl)}, {Key: "left", Value: false}}}},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.Before)).Decode(&was)
		if !mongo.IsDuplicateKeyError(err) {
			break
		}
	}
	joined := errors.Is(err, mongo.ErrNoDocuments) // inserted
	if joined {
		err = nil
	}
	if mongo.IsDuplicateKeyError(err) {
		err = errLeft // only the member's tombstone is in the way
	}
	if err != nil {
		return fmt.Errorf("mongostore: heartbeat of %q in %q/%q: %w", member, topic, group, err)
	}
	if joined || was.Left || !was.ExpiresAt.After(now) {
		s.touchGroup(ctx, topic, group, now.Add(ttl))
	}
	return nil
}

// liveMembers returns the members of group on topic alive at now, sorted,
// with member, which has just renewed, among them; it deletes the
// documents of members expired by now, and of tombstones past their keep,
// when it sees any.
func (s *Store) liveMembers(ctx context.Context, topic, group, member string, now time.Time) ([]string, error) {
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

// AcquireLease implements [event.LeaseStore] on the cursor document of
// p, in one round trip for a renewal and two for any other grant:
//
//  1. A FindOneAndUpdate of the document if it names member: a renewal,
//     or a lease of member's that ran out with nobody holding it since.
//     It sets expiresAt and keeps the token.
//  2. Otherwise an upserting FindOneAndUpdate of the document if it names
//     another member and is free (released, expired, or never leased):
//     it takes the lease and raises the token with $inc in the same
//     update. When there is no document, the upsert inserts one, with
//     token 1. When another member holds a live lease, the filter matches
//     nothing and the upsert's insert fails on the unique (topic, group,
//     partition) index: the lease is refused. Two members taking a free
//     lease at once are ordered by the server: the second then finds it
//     held, and is refused the same way.
//
// Both return the document as the update left it, with its token. A grant
// with a new token then sets the token of the partition's group-state
// document before it returns (see groupstate.go), so that a write of the
// previous holder's that reaches the group state after the grant returns
// is refused there; if that fails, the lease is given back and the error
// returned.
func (s *Store) AcquireLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, bool, error) {
	if err := checkPartition(p.Partition); err != nil {
		return 0, false, err
	}
	now := s.cfg.Clock.Now()
	after := options.FindOneAndUpdate().SetReturnDocument(options.After)
	var l struct {
		Token int64 `bson:"token"`
	}
	err := s.cursors.FindOneAndUpdate(ctx, append(cursorFilter(p), bson.E{Key: fMember, Value: member}),
		bson.D{{Key: "$set", Value: bson.D{{Key: fExpiresAt, Value: now.Add(ttl)}}}}, after).Decode(&l)
	if err == nil {
		return s.granted(p, l.Token)
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return 0, false, fmt.Errorf("mongostore: lease %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	free := append(cursorFilter(p),
		bson.E{Key: fMember, Value: bson.D{{Key: "$ne", Value: member}}},
		bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: fExpiresAt, Value: bson.D{{Key: "$lte", Value: now}}}},
			bson.D{{Key: fExpiresAt, Value: bson.D{{Key: "$exists", Value: false}}}},
		}})
	take := bson.D{
		{Key: "$set", Value: bson.D{{Key: fMember, Value: member}, {Key: fExpiresAt, Value: now.Add(ttl)}}},
		{Key: "$inc", Value: bson.D{{Key: fToken, Value: int64(1)}}},
	}
	err = s.cursors.FindOneAndUpdate(ctx, free, take, after.SetUpsert(true)).Decode(&l)
	if mongo.IsDuplicateKeyError(err) {
		return 0, false, nil // another member's live lease
	}
	if err != nil {
		return 0, false, fmt.Errorf("mongostore: lease %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	tok, ok, err := s.granted(p, l.Token)
	if err != nil {
		return 0, false, err
	}
	if err := s.fenceGroupState(ctx, p, tok); err != nil {
		// Give the lease back, so that the next grant is a new one and
		// fences the group state. Should the release fail too, the
		// member's next call renews the lease, and its first group-state
		// write raises the token there instead.
		_ = s.ReleaseLease(ctx, p, member)
		return 0, false, err
	}
	return tok, ok, nil
}

// TakeLease implements [event.LeaseStore] with one upserting
// FindOneAndUpdate of the cursor document of p, whose filter names only
// the partition: it sets member and expiresAt whoever holds the lease and
// raises the token with $inc in the same update (an insert, for a
// partition without a document, gets token 1). A fenced cursor commit is
// a conditional update of the same document, so the server orders it
// wholly before the take (it lands, and the taker reads it) or wholly
// after (its filter names the old token: refused). Two upserts that both
// insert the document collide on the unique (topic, group, partition)
// index, and the loser runs again: the document is there then. As for a
// grant with a new token, the token of the partition's group-state
// document is set before TakeLease returns; if that fails, the lease is
// given back and the error returned.
func (s *Store) TakeLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, error) {
	if err := checkPartition(p.Partition); err != nil {
		return 0, err
	}
	take := bson.D{
		{Key: "$set", Value: bson.D{{Key: fMember, Value: member}, {Key: fExpiresAt, Value: s.cfg.Clock.Now().Add(ttl)}}},
		{Key: "$inc", Value: bson.D{{Key: fToken, Value: int64(1)}}},
	}
	opts := options.FindOneAndUpdate().SetReturnDocument(options.After).SetUpsert(true)
	var l struct {
		Token int64 `bson:"token"`
	}
	var err error
	for range 2 { // again once if it raced with another insert of the document
		err = s.cursors.FindOneAndUpdate(ctx, cursorFilter(p), take, opts).Decode(&l)
		if !mongo.IsDuplicateKeyError(err) {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("mongostore: take lease %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	tok, _, err := s.granted(p, l.Token)
	if err != nil {
		return 0, err
	}
	if err := s.fenceGroupState(ctx, p, tok); err != nil {
		_ = s.ReleaseLease(ctx, p, member)
		return 0, err
	}
	return tok, nil
}

// granted checks the token of a lease document that a grant returned.
func (s *Store) granted(p event.PartitionRef, tok int64) (uint64, bool, error) {
	if tok < 1 {
		return 0, false, fmt.Errorf("%w: lease of %q/%q partition %d: token %d", ErrBadDocument, p.Topic, p.Group, p.Partition, tok)
	}
	return uint64(tok), true, nil
}

// ReleaseLease implements [event.LeaseStore]. The document stays, to keep
// the partition's cursor and token: the lease is marked released and its
// token raised (see the documents above).
func (s *Store) ReleaseLease(ctx context.Context, p event.PartitionRef, member string) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	_, err := s.cursors.UpdateOne(ctx, append(cursorFilter(p), bson.E{Key: fMember, Value: member}), bson.D{
		{Key: "$set", Value: bson.D{{Key: fMember, Value: ""}, {Key: fExpiresAt, Value: releasedAt}}},
		{Key: "$inc", Value: bson.D{{Key: fToken, Value: int64(1)}}},
	})
	if err != nil {
		return fmt.Errorf("mongostore: release %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}
