package mongostore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

// Documents of the groupstate collection, one per partition of a group
// that has state above its cursor or was ever leased:
//
//	{_id: "<topic>/<group>/<partition>", topic, group, partition: int32,
//	 s: {"<seq>": int32}, token: int64}
//
// A value of s is the number of attempts started, or gsSettled for a
// settled seq; both are merged with $max, so a write never lowers an
// attempt count or unsettles a seq, whichever member writes it. Topic and
// group names cannot hold "/", so the _id is unambiguous, and every
// operation but DeleteGroup's finds its document by _id (see
// docs/MONGODB.md).
//
// A fenced write (UpdateGroupState with a non-zero fence) takes two round
// trips. The state is not in the cursor document that holds the lease
// (groups.go), and MongoDB changes two documents in one step only in a
// multi-document transaction, which needs a replica set (the bundled test
// server has none). Moving the state into the cursor document would make
// every lease renewal return it: FerretDB does not take a projection in
// findAndModify. So:
//
//  1. The check: a FindOne of the partition's cursor document with the
//     filter of a fenced cursor commit (the fence's member and token,
//     expiresAt > now). No document: the write is refused with
//     [event.FenceError].
//  2. The write, by _id and on condition that the document's token is not
//     above the fence's; it raises token to the fence's ($max). A
//     document with a greater token does not match, the upsert's insert
//     fails on _id, and the write is refused the same way.
//
// token is the token of the latest grant of the lease with a new token:
// such a grant sets it (AcquireLease) before it returns, and a write of
// that holder's raises it to the same value if it was not set (the grant
// could not set it). Tokens only grow, so a holder's own writes always
// pass the condition. The grant sets it ($set, not $max) so that tokens
// started over by DeleteGroup are not held off for good by a token a
// former holder wrote while DeleteGroup ran; the price is that a grant
// whose call the server applies late, after a later grant, lowers it, and
// the writes of holders between the two are then held off by their check
// alone.
//
// So once a grant to another member has returned, no write of the
// previous holder lands, whenever it passed its check: its token is
// lower. A write that passed its check and lands before that grant
// returned is read by the new holder, which reads the state after its
// grant. What remains between the check and the write is the lease
// running out by the clock (or being released) with no new grant
// returned: a write that passed its check just before can land after.
// That write cannot lose a record. A member's state writes only mark
// settled the seqs it settled (acked or dead-lettered), raise attempt
// counts to the attempts it started, and forget the seqs its own fenced
// cursor commits passed; the member did all of it before its lease ran
// out, and the next holder reads it as if it had been written then: it
// does not deliver again what was settled, and counts the attempts that
// were made.

// gsSettled is the value of a settled seq; it is above every attempt count.
const gsSettled = math.MaxInt32

// maxAttemptsStored bounds the attempt counts the store takes.
const maxAttemptsStored = 1 << 30

func groupStateID(p event.PartitionRef) string {
	return p.Topic + "/" + p.Group + "/" + strconv.Itoa(p.Partition)
}

type groupStateDoc struct {
	S map[string]int32 `bson:"s"`
}

// GroupState implements [event.GroupStateStore].
func (s *Store) GroupState(ctx context.Context, p event.PartitionRef) (event.GroupState, error) {
	if err := checkPartition(p.Partition); err != nil {
		return event.GroupState{}, err
	}
	var doc groupStateDoc
	err := s.gstate.FindOne(ctx, bson.D{{Key: "_id", Value: groupStateID(p)}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return event.GroupState{}, nil
	}
	if err != nil {
		return event.GroupState{}, fmt.Errorf("mongostore: group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	var st event.GroupState
	for k, v := range doc.S {
		seq, err := strconv.ParseUint(k, 10, 64)
		if err != nil || seq == 0 || v < 1 {
			return event.GroupState{}, fmt.Errorf("%w: group state of %q/%q partition %d: entry %q: %d",
				ErrBadDocument, p.Topic, p.Group, p.Partition, k, v)
		}
		if v == gsSettled {
			st.Settled = append(st.Settled, seq)
			continue
		}
		if st.Attempts == nil {
			st.Attempts = make(map[uint64]int)
		}
		st.Attempts[seq] = int(v)
	}
	slices.Sort(st.Settled)
	return st, nil
}

// UpdateGroupState implements [event.GroupStateStore] with one update by
// _id: $max for attempts and settled seqs, $unset for forgotten ones. A
// non-zero fence is checked first (see the documents above), also when
// u changes nothing.
func (s *Store) UpdateGroupState(ctx context.Context, p event.PartitionRef, u event.GroupStateUpdate, f event.Fence) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	forget := make(map[uint64]bool, len(u.Forget))
	unset := bson.D{}
	for _, seq := range u.Forget {
		if !forget[seq] {
			forget[seq] = true
			unset = append(unset, bson.E{Key: "s." + strconv.FormatUint(seq, 10), Value: ""})
		}
	}
	raise := bson.D{}
	settled := make(map[uint64]bool, len(u.Settled))
	for _, seq := range u.Settled {
		if seq == 0 {
			return invalid("Settled", "seq 0")
		}
		if !forget[seq] && !settled[seq] {
			settled[seq] = true
			raise = append(raise, bson.E{Key: "s." + strconv.FormatUint(seq, 10), Value: int32(gsSettled)})
		}
	}
	for seq, n := range u.Attempts {
		if n < 1 || n > maxAttemptsStored {
			return invalid("Attempts", "seq %d: %d, want 1 to 2^30", seq, n)
		}
		if seq == 0 {
			return invalid("Attempts", "seq 0")
		}
		if !forget[seq] && !settled[seq] {
			raise = append(raise, bson.E{Key: "s." + strconv.FormatUint(seq, 10), Value: int32(n)})
		}
	}
	var err error
	if f.IsZero() {
		err = s.writeGroupState(ctx, p, raise, unset)
	} else {
		err = s.writeGroupStateFenced(ctx, p, raise, unset, f)
	}
	if errors.Is(err, event.ErrLeaseLost) {
		return err
	}
	if err != nil {
		return fmt.Errorf("mongostore: write group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}

// writeGroupState writes an update without a fence.
func (s *Store) writeGroupState(ctx context.Context, p event.PartitionRef, raise, unset bson.D) error {
	id := bson.D{{Key: fID, Value: groupStateID(p)}}
	switch {
	case len(raise) > 0:
		update := bson.D{{Key: "$max", Value: raise}, {Key: "$setOnInsert", Value: groupStateKey(p)}}
		if len(unset) > 0 {
			update = append(update, bson.E{Key: "$unset", Value: unset})
		}
		return upsert(ctx, s.gstate, id, update)
	case len(unset) > 0:
		_, err := s.gstate.UpdateOne(ctx, id, bson.D{{Key: "$unset", Value: unset}})
		return err
	}
	return nil
}

// writeGroupStateFenced checks f's lease on p, then writes the update if
// the document's token is not above f's (see the documents above).
func (s *Store) writeGroupStateFenced(ctx context.Context, p event.PartitionRef, raise, unset bson.D, f event.Fence) error {
	filter, ok := s.fenceFilter(p, f)
	if !ok {
		return event.FenceError(p, f)
	}
	err := s.cursors.FindOne(ctx, filter, options.FindOne().SetProjection(bson.D{{Key: fID, Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return event.FenceError(p, f)
	}
	if err != nil {
		return fmt.Errorf("check the lease: %w", err)
	}
	if s.afterFenceCheck != nil {
		s.afterFenceCheck()
	}
	if len(raise) == 0 && len(unset) == 0 {
		return nil
	}
	tok := int64(f.Token)
	update := bson.D{
		{Key: "$max", Value: append(raise, bson.E{Key: fToken, Value: tok})},
		{Key: "$setOnInsert", Value: groupStateKey(p)},
	}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	guard := bson.D{
		{Key: fID, Value: groupStateID(p)},
		{Key: fToken, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: tok}}}}},
	}
	opts := options.UpdateOne().SetUpsert(true)
	for range 2 { // again once if it raced with another insert of the document
		_, err = s.gstate.UpdateOne(ctx, guard, update, opts)
		if !mongo.IsDuplicateKeyError(err) {
			return err
		}
	}
	return event.FenceError(p, f) // a greater token holds the document
}

// fenceGroupState sets the token of p's group-state document to tok, that
// of a grant with a new token.
func (s *Store) fenceGroupState(ctx context.Context, p event.PartitionRef, tok uint64) error {
	err := upsert(ctx, s.gstate, bson.D{{Key: fID, Value: groupStateID(p)}}, bson.D{
		{Key: "$set", Value: bson.D{{Key: fToken, Value: int64(tok)}}},
		{Key: "$setOnInsert", Value: groupStateKey(p)},
	})
	if err != nil {
		return fmt.Errorf("mongostore: lease %q/%q partition %d: fence the group state: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}

func groupStateKey(p event.PartitionRef) bson.D {
	return bson.D{{Key: "topic", Value: p.Topic}, {Key: "group", Value: p.Group}, {Key: "partition", Value: int32(p.Partition)}}
}

// ResetGroupState implements [event.GroupStateStore]. It deletes the
// state but keeps the document's token, which keeps holding off the
// writes of former holders.
func (s *Store) ResetGroupState(ctx context.Context, p event.PartitionRef) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	_, err := s.gstate.UpdateOne(ctx, bson.D{{Key: fID, Value: groupStateID(p)}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "s", Value: ""}}}})
	if err != nil {
		return fmt.Errorf("mongostore: reset group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}
