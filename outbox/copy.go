package outbox

import (
	"context"
	"fmt"
)

// PendingLister is implemented by outbox stores that list the rows not
// sent yet, for [Copy]. Every store of this module does.
type PendingLister interface {
	// PendingRows returns every pending row, in the order they were
	// added (Seq).
	PendingRows(ctx context.Context) ([]Row, error)
}

// CopyReport is what a [Copy] did.
type CopyReport struct {
	// Copied counts the rows added to the destination, Present those it
	// held pending already.
	Copied  int `json:"copied"`
	Present int `json:"present"`
}

// Copy adds the pending rows of src (rows not sent yet) to dst, in the
// order they were added, as new pending rows with the same ids, topics,
// keys, headers and payloads; their attempts, errors and retry times
// start over in dst. A row dst holds pending already (a copy run again) is
// not added twice. Failed and sent rows are not copied.
//
// Stop the applications that add to the source and its drainer first, or
// let the drainer empty it (Stats shows 0 pending): a row added or sent
// during the copy may be missed or copied once sent. A row copied that the
// source's drainer had published (it crashed before marking it sent) is
// published again by dst's drainer with the same id, which the event
// store holds: it stores nothing new.
func Copy(ctx context.Context, dst Store, src PendingLister) (CopyReport, error) {
	var rep CopyReport
	if dst == nil || src == nil {
		return rep, invalid("store", "copy needs a source and a destination")
	}
	dl, ok := dst.(PendingLister)
	if !ok {
		return rep, invalid("dst", "%T does not list its pending rows (outbox.PendingLister)", dst)
	}
	rows, err := src.PendingRows(ctx)
	if err != nil {
		return rep, fmt.Errorf("outbox: copy: read the source: %w", err)
	}
	held, err := dl.PendingRows(ctx)
	if err != nil {
		return rep, fmt.Errorf("outbox: copy: read the destination: %w", err)
	}
	have := make(map[string]bool, len(held))
	for _, r := range held {
		have[r.ID] = true
	}
	const batch = 500
	msgs := make([]Message, 0, min(len(rows), batch))
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		if err := dst.Add(ctx, msgs...); err != nil {
			return fmt.Errorf("outbox: copy: add %d rows from %q: %w", len(msgs), msgs[0].ID, err)
		}
		rep.Copied += len(msgs)
		msgs = msgs[:0]
		return nil
	}
	for _, r := range rows {
		if have[r.ID] {
			rep.Present++
			continue
		}
		msgs = append(msgs, r.Message)
		if len(msgs) == batch {
			if err := flush(); err != nil {
				return rep, err
			}
		}
	}
	return rep, flush()
}
