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

	"github.com/promethean/promlib/event"
)

// Documents of the groupstate collection, one per partition of a group
// that has state above its cursor:
//
//	{_id: "<topic>/<group>/<partition>", topic, group, partition: int32,
//	 s: {"<seq>": int32}}
//
// A value of s is the number of attempts started, or gsSettled for a
// settled seq; both are merged with $max, so a write never lowers an
// attempt count or unsettles a seq, whichever member writes it. Topic and
// group names cannot hold "/", so the _id is unambiguous, and every
// operation filters on _id alone (see docs/MONGODB.md).

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
// _id: $max for attempts and settled seqs, $unset for forgotten ones.
func (s *Store) UpdateGroupState(ctx context.Context, p event.PartitionRef, u event.GroupStateUpdate) error {
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
	id := bson.D{{Key: "_id", Value: groupStateID(p)}}
	var err error
	switch {
	case len(raise) > 0:
		update := bson.D{
			{Key: "$max", Value: raise},
			{Key: "$setOnInsert", Value: bson.D{{Key: "topic", Value: p.Topic}, {Key: "group", Value: p.Group}, {Key: "partition", Value: int32(p.Partition)}}},
		}
		if len(unset) > 0 {
			update = append(update, bson.E{Key: "$unset", Value: unset})
		}
		err = upsert(ctx, s.gstate, id, update)
	case len(unset) > 0:
		_, err = s.gstate.UpdateOne(ctx, id, bson.D{{Key: "$unset", Value: unset}})
	}
	if err != nil {
		return fmt.Errorf("mongostore: write group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}

// ResetGroupState implements [event.GroupStateStore].
func (s *Store) ResetGroupState(ctx context.Context, p event.PartitionRef) error {
	if err := checkPartition(p.Partition); err != nil {
		return err
	}
	if _, err := s.gstate.DeleteOne(ctx, bson.D{{Key: "_id", Value: groupStateID(p)}}); err != nil {
		return fmt.Errorf("mongostore: reset group state of %q/%q partition %d: %w", p.Topic, p.Group, p.Partition, err)
	}
	return nil
}
