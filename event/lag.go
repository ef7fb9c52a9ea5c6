package event

import (
	"context"
	"fmt"
	"time"
)

// RecordRef names a record.
type RecordRef struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id"`
	TS  int64  `json:"ts"`
}

// oldestPage and oldestPages bound the records a status reads to find
// the oldest unsettled one when partitions' cursors differ.
const (
	oldestPage  = 256
	oldestPages = 4
)

// lag fills in the Lag, LagMs and Oldest of st from its Head, Committed
// and partitions' cursors, at time now: it reads the records after
// Committed when the group is behind.
func (b *Bus) lag(ctx context.Context, st *GroupStatus, now time.Time) error {
	if st.Head <= st.Committed {
		return nil
	}
	st.Lag = st.Head - st.Committed
	cursors := make(map[int]uint64, len(st.Partitions))
	for _, p := range st.Partitions {
		cursors[p.Partition] = p.Cursor
	}
	// The oldest unsettled record is the first one above its partition's
	// cursor; with one partition, the first one read.
	var first *Record
	after := st.Committed
scan:
	for range oldestPages {
		recs, err := b.store.Read(ctx, st.Topic, after, oldestPage)
		if err != nil {
			return fmt.Errorf("event: read %q: %w", st.Topic, err)
		}
		for i := range recs {
			r := &recs[i]
			if first == nil {
				first = r
			}
			pc, ok := cursors[r.Partition]
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
		st.Oldest = &RecordRef{Seq: first.Seq, ID: first.ID, TS: first.TS}
		st.LagMs = max(now.UnixMilli()-first.TS, 0)
	}
	return nil
}
