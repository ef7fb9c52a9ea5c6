package event

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Dead letters belong to the group that failed them: a Bus moves a record
// that failed its last attempt in group G of topic T to G's dead-letter
// topic (the group setting [GroupConfig].DeadLetterTopic, by default
// [DeadLetterTopic] of T, "<T>.dlq") with the x-dlq-group header naming
// G. The dead letters of G are the records of that topic that name T and
// G and were neither redriven nor purged: [Bus.DeadLetters] lists them,
// [Bus.RedriveDeadLetters] delivers them again to G only ([Bus.Redrive]),
// [Bus.PurgeDeadLetters] drops them. Both mark the records done. The
// marks of a dead-letter topic are the committed cursor and the settled
// set of the group [DeadLetterMarksGroup] on it, partition 0, in the
// Bus's [CursorStore] and [GroupStateStore]: every Bus over the store
// sees them, and each record is redriven once.

// DeadLetterMarksGroup is the group whose cursor and settled set on a
// dead-letter topic (partition 0) mark its records redriven or purged:
// every record at or below the cursor, and those settled above it. It is
// the name package ops used for them before they moved here, so the
// marks of an existing database stay valid.
const DeadLetterMarksGroup = "ops.redrive"

// deadLetterPage bounds one store read of a dead-letter topic;
// deadLetterPages bounds the reads of a page of [Bus.DeadLetters], and
// deadLetterCountPages those of a count of [DeadLetterSummary].Pending
// (which a status reads at every look: the dashboard polls it).
const (
	deadLetterPage       = 256
	deadLetterPages      = 16
	deadLetterCountPages = 4
)

// deadLetterMu makes the redrives and purges of a process run one at a
// time, so that two of them at once do not both take the same records.
// (Two in different processes may: the redriven records' ids derive from
// the dead letters', so each is stored once.)
var deadLetterMu sync.Mutex

// deadLetterMarks are the records of a dead-letter topic that are done.
type deadLetterMarks struct {
	cursor uint64          // every seq up to it is done
	done   map[uint64]bool // and these above it
}

func (m *deadLetterMarks) isDone(seq uint64) bool { return seq <= m.cursor || m.done[seq] }

// pendingIn is how many records of a dead-letter topic whose head is
// head are not done, whichever group they belong to.
func (m *deadLetterMarks) pendingIn(head uint64) uint64 {
	if head <= m.cursor {
		return 0
	}
	n := head - m.cursor
	for s := range m.done {
		if s > m.cursor && s <= head {
			n--
		}
	}
	return n
}

func marksRef(dlq string) PartitionRef {
	return PartitionRef{Topic: dlq, Group: DeadLetterMarksGroup, Partition: 0}
}

// deadLetterMarks reads the marks of the dead-letter topic dlq.
func (b *Bus) deadLetterMarks(ctx context.Context, dlq string) (deadLetterMarks, error) {
	m := deadLetterMarks{done: map[uint64]bool{}}
	cur, err := b.cfg.Cursors.Cursors(ctx, dlq, DeadLetterMarksGroup)
	if err != nil {
		return m, fmt.Errorf("event: marks of %q: %w", dlq, err)
	}
	m.cursor = cur[0]
	st, err := b.cfg.GroupState.GroupState(ctx, marksRef(dlq))
	if err != nil {
		return m, fmt.Errorf("event: marks of %q: %w", dlq, err)
	}
	for _, s := range st.Settled {
		m.done[s] = true
	}
	return m, nil
}

// markDeadLetters marks seqs of dlq done, and moves the cursor over the
// done ones that follow it.
func (b *Bus) markDeadLetters(ctx context.Context, dlq string, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	ref := marksRef(dlq)
	if err := b.cfg.GroupState.UpdateGroupState(ctx, ref, GroupStateUpdate{Settled: seqs}, Fence{}); err != nil {
		return fmt.Errorf("event: mark %q: %w", dlq, err)
	}
	m, err := b.deadLetterMarks(ctx, dlq)
	if err != nil {
		return err
	}
	c := m.cursor
	var forget []uint64
	for m.done[c+1] {
		c++
		forget = append(forget, c)
	}
	if c == m.cursor {
		return nil
	}
	if err := b.cfg.Cursors.CommitCursor(ctx, ref, c, Fence{}); err != nil {
		return fmt.Errorf("event: mark %q: %w", dlq, err)
	}
	if err := b.cfg.GroupState.UpdateGroupState(ctx, ref, GroupStateUpdate{Forget: forget}, Fence{}); err != nil {
		return fmt.Errorf("event: mark %q: %w", dlq, err)
	}
	return nil
}

// deadLetterTopicOf returns the dead-letter topic of group on topic: the
// one stored with the group's settings, or the topic's default for a
// group that has none stored (it never subscribed, or only with a
// release that did not store them).
func (b *Bus) deadLetterTopicOf(ctx context.Context, topic, group string) (string, error) {
	cfg, err := b.cfg.Groups.GroupConfig(ctx, topic, group)
	if errors.Is(err, ErrNotFound) {
		return DeadLetterTopic(topic), nil
	}
	if err != nil {
		return "", fmt.Errorf("event: settings of group %q on %q: %w", group, topic, err)
	}
	cfg.setDefaults(topic)
	return cfg.DeadLetterTopic, nil
}

// isDeadLetterOf reports whether the dead-lettered record d failed in
// group of topic.
func isDeadLetterOf(d *Record, topic, group string) bool {
	t, g, _, _, err := DeadLetterOrigin(d)
	return err == nil && t == topic && g == group
}

// scanDeadLetters calls fn, oldest first, with each record of the
// dead-letter topic dlq after seq after that m does not mark done, until
// fn returns false or pages reads were made. It returns the seq of the
// last record it read and whether it read up to the head.
func (b *Bus) scanDeadLetters(ctx context.Context, dlq string, m *deadLetterMarks, after uint64, pages int, fn func(*Record) bool) (uint64, bool, error) {
	pos := max(after, m.cursor)
	for range pages {
		recs, err := b.store.Read(ctx, dlq, pos, deadLetterPage)
		if err != nil {
			return pos, false, fmt.Errorf("event: read %q: %w", dlq, err)
		}
		for i := range recs {
			d := &recs[i]
			pos = d.Seq
			if !m.isDone(d.Seq) && !fn(d) {
				return pos, i == len(recs)-1 && len(recs) < deadLetterPage, nil
			}
		}
		if len(recs) < deadLetterPage {
			return pos, true, nil
		}
	}
	return pos, false, nil
}

// DeadLetterSummary is a group's dead letters at a glance.
type DeadLetterSummary struct {
	// Topic is the group's dead-letter topic, Head its highest seq.
	Topic string `json:"topic"`
	Head  uint64 `json:"head"`
	// Pending counts the group's dead letters: the records of Topic that
	// the group failed and that were neither redriven nor purged.
	Pending uint64 `json:"pending"`
	// More says that Pending is a lower bound: counting stopped after
	// 1,024 records of Topic that are not done (of any group).
	More bool `json:"more,omitempty"`
}

// deadLetterCounts counts the pending dead letters of a dead-letter
// topic by the topic and group they failed in.
type deadLetterCounts struct {
	head    uint64
	by      map[[2]string]uint64
	partial bool
}

// countDeadLetters counts the pending dead letters of dlq by group.
func (b *Bus) countDeadLetters(ctx context.Context, dlq string) (deadLetterCounts, error) {
	c := deadLetterCounts{by: map[[2]string]uint64{}}
	head, err := b.store.Head(ctx, dlq)
	if err != nil {
		return c, fmt.Errorf("event: head of %q: %w", dlq, err)
	}
	c.head = head
	if head == 0 {
		return c, nil
	}
	m, err := b.deadLetterMarks(ctx, dlq)
	if err != nil {
		return c, err
	}
	if m.pendingIn(head) == 0 {
		return c, nil // every record is done: nothing to read
	}
	last, complete, err := b.scanDeadLetters(ctx, dlq, &m, 0, deadLetterCountPages, func(d *Record) bool {
		if t, g, _, _, err := DeadLetterOrigin(d); err == nil {
			c.by[[2]string{t, g}]++
		}
		return true
	})
	// Records stored after the head was read were counted too.
	c.head, c.partial = max(c.head, last), !complete
	return c, err
}

// summary returns the summary of the dead letters of group on topic.
func (c *deadLetterCounts) summary(dlq, topic, group string) DeadLetterSummary {
	n := c.by[[2]string{topic, group}]
	return DeadLetterSummary{Topic: dlq, Head: c.head, Pending: n, More: c.partial}
}

// DeadLetterPage is a page of a group's dead letters, oldest first.
type DeadLetterPage struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// DeadLetters sums up the group's dead letters, all of them.
	DeadLetters DeadLetterSummary `json:"dlq"`
	// Records are the dead letters of this page: records of the group's
	// dead-letter topic, with the x-dlq-* headers the Bus set.
	Records []Record `json:"records"`
	// Next is the seq to pass as after for the next page; 0 when this
	// page reached the head.
	Next uint64 `json:"next,omitempty"`
}

// DeadLetters returns up to limit of the dead letters of group on topic,
// oldest first, after the seq after of its dead-letter topic (0: from
// the oldest): the records of the group's dead-letter topic
// ([GroupConfig].DeadLetterTopic, "<topic>.dlq" for a group without
// stored settings) that the group failed and that were neither redriven
// nor purged. One call reads at most 4,096 records of the dead-letter
// topic that are not done; Next continues after them.
func (b *Bus) DeadLetters(ctx context.Context, topic, group string, after uint64, limit int) (DeadLetterPage, error) {
	page := DeadLetterPage{Topic: topic, Group: group, Records: []Record{}}
	if err := b.checkDeadLetterArgs(topic, group); err != nil {
		return page, err
	}
	if limit < 1 {
		return page, invalid("limit", "%d, want at least 1", limit)
	}
	dlq, err := b.deadLetterTopicOf(ctx, topic, group)
	if err != nil {
		return page, err
	}
	counts, err := b.countDeadLetters(ctx, dlq)
	if err != nil {
		return page, err
	}
	page.DeadLetters = counts.summary(dlq, topic, group)
	if page.DeadLetters.Pending == 0 && !counts.partial {
		return page, nil
	}
	page.Records, page.Next, err = b.pendingDeadLetters(ctx, dlq, topic, group, after, limit)
	return page, err
}

func (b *Bus) checkDeadLetterArgs(topic, group string) error {
	if b.isClosed() {
		return ErrClosed
	}
	return errors.Join(ValidateTopic(topic), ValidateGroup(group))
}

// pendingDeadLetters returns up to limit dead letters of group on topic
// in dlq after seq after, oldest first, and the seq to continue after (0
// at the head).
func (b *Bus) pendingDeadLetters(ctx context.Context, dlq, topic, group string, after uint64, limit int) ([]Record, uint64, error) {
	m, err := b.deadLetterMarks(ctx, dlq)
	if err != nil {
		return nil, 0, err
	}
	out := []Record{}
	pos, complete, err := b.scanDeadLetters(ctx, dlq, &m, after, deadLetterPages, func(d *Record) bool {
		if isDeadLetterOf(d, topic, group) {
			out = append(out, *d)
		}
		return len(out) < limit
	})
	if err != nil {
		return nil, 0, err
	}
	if complete {
		pos = 0
	}
	return out, pos, nil
}

// selectedDeadLetters returns the dead letters of group on topic in dlq
// with the given ids (of the dead-lettered records); an id that is not
// there, not the group's, or done already is an error wrapping
// ErrNotFound that names it.
func (b *Bus) selectedDeadLetters(ctx context.Context, dlq, topic, group string, ids []string) ([]Record, error) {
	m, err := b.deadLetterMarks(ctx, dlq)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(ids))
	for _, id := range ids {
		d, err := b.store.FindByID(ctx, dlq, id)
		if errors.Is(err, ErrNotFound) || err == nil && (!isDeadLetterOf(&d, topic, group) || m.isDone(d.Seq)) {
			return nil, fmt.Errorf("%w: no record %q in the dead letters of group %q on %q", ErrNotFound, id, group, topic)
		}
		if err != nil {
			return nil, fmt.Errorf("event: read %q: %w", dlq, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// DeadLetterResult is what [Bus.RedriveDeadLetters] and
// [Bus.PurgeDeadLetters] did.
type DeadLetterResult struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// IDs are those of the dead letters redriven or purged.
	IDs []string `json:"ids"`
	// Records are the records stored in the group's redrive topic
	// (redrive only).
	Records []Record `json:"records,omitempty"`
}

// RedriveDeadLetters delivers dead letters of group on topic again to
// that group only ([Bus.Redrive]) and marks them done: those with the
// given ids (of the dead-lettered records, in the group's dead-letter
// topic), or without ids the oldest limit ones. An id that is not one of
// the group's pending dead letters is an error wrapping ErrNotFound, and
// nothing is redriven. A record is redriven once, also when two calls
// race, in one process or in several (the redriven record's id derives
// from the dead letter's).
func (b *Bus) RedriveDeadLetters(ctx context.Context, topic, group string, ids []string, limit int) (DeadLetterResult, error) {
	return b.settleDeadLetters(ctx, topic, group, ids, limit, true)
}

// PurgeDeadLetters drops dead letters of group on topic, chosen as by
// [Bus.RedriveDeadLetters], without redriving them: they are marked done,
// and stay in the dead-letter topic until its retention deletes them.
func (b *Bus) PurgeDeadLetters(ctx context.Context, topic, group string, ids []string, limit int) (DeadLetterResult, error) {
	return b.settleDeadLetters(ctx, topic, group, ids, limit, false)
}

func (b *Bus) settleDeadLetters(ctx context.Context, topic, group string, ids []string, limit int, redrive bool) (DeadLetterResult, error) {
	res := DeadLetterResult{Topic: topic, Group: group, IDs: []string{}}
	if err := b.checkDeadLetterArgs(topic, group); err != nil {
		return res, err
	}
	if len(ids) == 0 && limit < 1 {
		return res, invalid("limit", "%d, want at least 1", limit)
	}
	ids = uniqueIDs(ids)
	deadLetterMu.Lock()
	defer deadLetterMu.Unlock()
	dlq, err := b.deadLetterTopicOf(ctx, topic, group)
	if err != nil {
		return res, err
	}
	var dead []Record
	if len(ids) > 0 {
		dead, err = b.selectedDeadLetters(ctx, dlq, topic, group, ids)
	} else {
		dead, _, err = b.pendingDeadLetters(ctx, dlq, topic, group, 0, limit)
	}
	if err != nil {
		return res, err
	}
	seqs := make([]uint64, 0, len(dead))
	for _, d := range dead {
		res.IDs = append(res.IDs, d.ID)
		seqs = append(seqs, d.Seq)
	}
	if redrive && len(dead) > 0 {
		if res.Records, err = b.Redrive(ctx, dead); err != nil {
			return DeadLetterResult{Topic: topic, Group: group, IDs: []string{}}, err
		}
	}
	// Marked after the redrive: a failure between them redrives again,
	// and the derived ids store nothing twice.
	if err := b.markDeadLetters(ctx, dlq, seqs); err != nil {
		return DeadLetterResult{Topic: topic, Group: group, IDs: []string{}}, err
	}
	return res, nil
}

// uniqueIDs returns ids without repeats, in their first order.
func uniqueIDs(ids []string) []string {
	if len(ids) < 2 {
		return ids
	}
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
