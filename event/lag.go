package event

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// GroupLag is how far a consumer group is behind the head of a topic.
type GroupLag struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// Head is the highest seq of the topic.
	Head uint64 `json:"head"`
	// Committed is the group's committed cursor: the lowest committed seq
	// over the partitions. Partitions holds the cursor of each.
	Committed  uint64         `json:"committed"`
	Partitions map[int]uint64 `json:"partitions"`
	// Lag is Head - Committed, in events: the records the group has not
	// settled, exact with one partition. With several, it also counts the
	// records, above Committed, of partitions whose cursor is ahead, so it
	// is an upper bound.
	Lag uint64 `json:"lag"`
	// LagMs is the age of the oldest record the group has not settled: now
	// minus its ts; 0 when Lag is 0. With several partitions whose cursors
	// differ, the first record above its partition's cursor among the
	// first 1,024 after Committed; failing that, the first one after
	// Committed (an upper bound).
	LagMs int64 `json:"lag_ms"`
	// Oldest is that record, when Lag > 0.
	Oldest *RecordRef `json:"oldest,omitempty"`
}

// RecordRef names a record.
type RecordRef struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id"`
	TS  int64  `json:"ts"`
}

// oldestPage and oldestPages bound the records Lag reads to find the
// oldest unsettled one when partitions' cursors differ.
const (
	oldestPage  = 256
	oldestPages = 4
)

// Lag is [Bus.LagAt] at the time of the Bus's clock.
func (b *Bus) Lag(ctx context.Context, topic, group string) (GroupLag, error) {
	return b.LagAt(ctx, topic, group, b.clk.Now())
}

// LagAt returns the lag of group on topic at time now, from the group's
// stored cursor (committed every [Config].CommitInterval, so an ack shows
// after that) and the topic's head. A group without a cursor gives an
// error wrapping [ErrNotFound]. It reads the store: the cursor, the head
// and, when the group is behind, the records after the cursor.
func (b *Bus) LagAt(ctx context.Context, topic, group string, now time.Time) (GroupLag, error) {
	cur, err := b.Cursor(ctx, topic, group)
	if errors.Is(err, ErrNotFound) {
		return GroupLag{}, fmt.Errorf("%w: group %q has no cursor on topic %q", ErrNotFound, group, topic)
	}
	if err != nil {
		return GroupLag{}, err
	}
	head, err := b.store.Head(ctx, topic)
	if err != nil {
		return GroupLag{}, fmt.Errorf("event: head of %q: %w", topic, err)
	}
	l := GroupLag{Topic: topic, Group: group, Head: head, Committed: cur.Seq, Partitions: cur.Partitions}
	if head <= cur.Seq {
		return l, nil
	}
	l.Lag = head - cur.Seq
	// The oldest unsettled record is the first one above its partition's
	// cursor; with one partition, the first one read.
	var first *Record
	after := cur.Seq
scan:
	for range oldestPages {
		recs, err := b.store.Read(ctx, topic, after, oldestPage)
		if err != nil {
			return GroupLag{}, fmt.Errorf("event: read %q: %w", topic, err)
		}
		for i := range recs {
			r := &recs[i]
			if first == nil {
				first = r
			}
			pc, ok := cur.Partitions[r.Partition]
			if !ok || r.Seq > pc {
				first = r
				break scan
			}
		}
		if len(recs) < oldestPage {
			break
		}
		after = recs[len(recs)-1].Seq
	}
	if first != nil {
		l.Oldest = &RecordRef{Seq: first.Seq, ID: first.ID, TS: first.TS}
		l.LagMs = max(now.UnixMilli()-first.TS, 0)
	}
	return l, nil
}
